package release

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
)

func TestOwnerOf(t *testing.T) {
	deployment := ObjectID{Group: "apps", Kind: "Deployment", Namespace: "gpu-operator", Name: "gpu-operator"}
	policy := ObjectID{Group: "nvidia.com", Kind: "ClusterPolicy", Name: "cluster-policy"}
	for _, tc := range []struct {
		name        string
		id          ObjectID
		labels      map[string]string
		annotations map[string]string
		want        string // "" = no owner
	}{
		{name: "an object helm-controller rendered is its HelmRelease's", id: deployment,
			labels: map[string]string{FluxNameLabel: "gpu-operator", FluxNamespaceLabel: "flux-system"},
			want:   "Flux HelmRelease flux-system/gpu-operator"},
		{name: "a Flux name label without its namespace label is no mark", id: deployment,
			labels: map[string]string{FluxNameLabel: "gpu-operator"}},
		{name: "an object Argo CD tracks is its Application's", id: deployment,
			annotations: map[string]string{ArgoCDTrackingAnnotation: "gpu:apps/Deployment:gpu-operator/gpu-operator"},
			want:        "Argo CD Application gpu"},
		{name: "an Application outside Argo CD's namespace is named with its namespace", id: deployment,
			annotations: map[string]string{ArgoCDTrackingAnnotation: "team-a_gpu:apps/Deployment:gpu-operator/gpu-operator"},
			want:        "Argo CD Application team-a/gpu"},
		{name: "a cluster-scoped object's tracking id names the destination namespace", id: policy,
			annotations: map[string]string{ArgoCDTrackingAnnotation: "gpu:nvidia.com/ClusterPolicy:gpu-operator/cluster-policy"},
			want:        "Argo CD Application gpu"},
		{name: "a tracking id copied from another object is not ownership", id: deployment,
			annotations: map[string]string{ArgoCDTrackingAnnotation: "gpu:apps/Deployment:gpu-operator/other"}},
		{name: "a tracking id of another namespace is not ownership", id: deployment,
			annotations: map[string]string{ArgoCDTrackingAnnotation: "gpu:apps/Deployment:default/gpu-operator"}},
		{name: "a malformed tracking id is no mark", id: deployment,
			annotations: map[string]string{ArgoCDTrackingAnnotation: "gpu"}},
		{name: "Helm's instance label (also Argo CD's label tracking) is not read", id: deployment,
			labels: map[string]string{"app.kubernetes.io/instance": "gpu-operator", "app.kubernetes.io/managed-by": "Helm"}},
		{name: "an object of gpuctl's own release has no owner", id: deployment,
			annotations: map[string]string{"meta.helm.sh/release-name": "gpu-operator"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, ok := OwnerOf(tc.id, tc.labels, tc.annotations)
			got := ""
			if ok {
				got = o.String()
			}
			if got != tc.want {
				t.Errorf("owner %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOwnedErrorNamesWhereToChange(t *testing.T) {
	for _, tc := range []struct {
		err  OwnedError
		want string
	}{
		{OwnedError{Object: "release gpu-operator/gpu-operator", Owner: Owner{Engine: "Flux", Kind: "HelmRelease", Namespace: "gpu-operator", Name: "gpu-operator"}},
			"release gpu-operator/gpu-operator is managed by Flux HelmRelease gpu-operator/gpu-operator: change it there (gpuctl export --for flux writes it)"},
		{OwnedError{Object: "ClusterPolicy cluster-policy", Owner: Owner{Engine: "Argo CD", Kind: "Application", Name: "gpu"}},
			"ClusterPolicy cluster-policy is managed by Argo CD Application gpu: change it there (gpuctl export --for argocd writes it)"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

func TestOwnerOfObjects(t *testing.T) {
	info := func(kind, ns, name string, labels map[string]string) *resource.Info {
		gvk := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: kind}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(labels)
		return &resource.Info{Name: name, Namespace: ns, Mapping: &meta.RESTMapping{GroupVersionKind: gvk}, Object: u}
	}
	flux := map[string]string{FluxNameLabel: "gpu-operator", FluxNamespaceLabel: "flux-system"}
	for _, tc := range []struct {
		name       string
		stored     []*resource.Info
		live       map[string]map[string]string // name → live labels; absent = gone
		liveErr    error
		want, mark string
		wantErr    bool
	}{
		{name: "the stored manifest carries the labels (Flux installed the release)",
			stored: []*resource.Info{info("Deployment", "gpu-operator", "a", nil), info("DaemonSet", "gpu-operator", "b", flux)},
			live:   map[string]map[string]string{"a": nil, "b": flux},
			want:   "Flux HelmRelease flux-system/gpu-operator", mark: "DaemonSet gpu-operator/b"},
		{name: "an object in the cluster carries them (an engine took the release over)",
			stored: []*resource.Info{info("Deployment", "gpu-operator", "a", nil)},
			live:   map[string]map[string]string{"a": flux},
			want:   "Flux HelmRelease flux-system/gpu-operator", mark: "Deployment gpu-operator/a"},
		{name: "an object that is gone is skipped",
			stored: []*resource.Info{info("Deployment", "gpu-operator", "a", nil), info("Deployment", "gpu-operator", "b", nil)},
			live:   map[string]map[string]string{"b": flux},
			want:   "Flux HelmRelease flux-system/gpu-operator", mark: "Deployment gpu-operator/b"},
		{name: "no mark anywhere: gpuctl's own",
			stored: []*resource.Info{info("Deployment", "gpu-operator", "a", nil)},
			live:   map[string]map[string]string{"a": {"app.kubernetes.io/instance": "gpu-operator"}}},
		{name: "an object that cannot be read is an error, not ownership",
			stored:  []*resource.Info{info("Deployment", "gpu-operator", "a", nil)},
			liveErr: errors.New("forbidden"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			get := func(i *resource.Info) error {
				if tc.liveErr != nil {
					return tc.liveErr
				}
				labels, ok := tc.live[i.Name]
				if !ok {
					return apierrors.NewNotFound(schema.GroupResource{Resource: "deployments"}, i.Name)
				}
				u := i.Object.(*unstructured.Unstructured).DeepCopy()
				u.SetLabels(labels)
				i.Object = u
				return nil
			}
			o, mark, err := ownerOfObjects(tc.stored, get)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			got := ""
			if o != nil {
				got = o.String()
			}
			if got != tc.want || mark != tc.mark {
				t.Errorf("owner %q on %q, want %q on %q", got, mark, tc.want, tc.mark)
			}
		})
	}
}
