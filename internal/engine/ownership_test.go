package engine

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/uninstall"
)

// TestRefuseOwnedObjects: the ClusterPolicy an install would write, or an object an uninstall would
// delete, that an engine manages stops the run as a failed preflight (exit 5) naming the engine's
// object; one nobody else manages, or that is not there, does not.
func TestRefuseOwnedObjects(t *testing.T) {
	policy := func(labels, annotations map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("nvidia.com/v1")
		u.SetKind("ClusterPolicy")
		u.SetName(plan.ClusterPolicyName)
		u.SetLabels(labels)
		u.SetAnnotations(annotations)
		return u
	}
	installing := installTargets(&plan.Plan{}, "gpu-operator")
	uninstalling := uninstallTargets(&uninstall.Plan{Delete: []uninstall.PlannedDeletion{
		{APIVersion: "nvidia.com/v1", Kind: "ClusterPolicy", Name: plan.ClusterPolicyName}}})
	for _, tc := range []struct {
		name    string
		targets writeTargets
		objects []runtime.Object
		want    string // the release.OwnedError's message; "" = not refused
	}{
		{name: "install: a ClusterPolicy Argo CD tracks is refused", targets: installing,
			objects: []runtime.Object{policy(nil, map[string]string{release.ArgoCDTrackingAnnotation: "gpu:nvidia.com/ClusterPolicy:gpu-operator/cluster-policy"})},
			want:    "ClusterPolicy cluster-policy is managed by Argo CD Application gpu: change it there (gpuctl export --for argocd writes it)"},
		{name: "uninstall: a ClusterPolicy helm-controller rendered is refused", targets: uninstalling,
			objects: []runtime.Object{policy(map[string]string{release.FluxNameLabel: "gpu-operator", release.FluxNamespaceLabel: "flux-system"}, nil)},
			want:    "ClusterPolicy cluster-policy is managed by Flux HelmRelease flux-system/gpu-operator: change it there (gpuctl export --for flux writes it)"},
		{name: "gpuctl's own ClusterPolicy is not refused", targets: installing,
			objects: []runtime.Object{policy(map[string]string{"app.kubernetes.io/instance": "gpu-operator"}, map[string]string{"meta.helm.sh/release-name": "gpu-operator"})}},
		{name: "no ClusterPolicy is not refused", targets: uninstalling},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gvr := schema.GroupVersionResource{Group: "nvidia.com", Version: "v1", Resource: "clusterpolicies"}
			mapper := meta.NewDefaultRESTMapper(nil)
			mapper.Add(gvr.GroupVersion().WithKind("ClusterPolicy"), meta.RESTScopeRoot)
			clients := &kube.Clients{Mapper: mapper, Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{gvr: "ClusterPolicyList"}, tc.objects...)}
			tc.targets.releases = nil // Helm's storage is the release package's to test
			err := refuseOwned(t.Context(), clients, tc.targets, event.Or(nil))
			var owned *release.OwnedError
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (!errors.As(err, &owned) || !errors.Is(err, preflight.ErrFailed) || owned.Error() != tc.want):
				t.Errorf("err %v\nwant %s, a failed preflight", err, tc.want)
			}
		})
	}
}

// TestInstallTargets: an install writes the plan's releases that are not skipped and its ClusterPolicy;
// without a plan, gpuctl's releases by name.
func TestInstallTargets(t *testing.T) {
	p := &plan.Plan{Steps: []plan.Step{
		{ID: "release-nfd", Release: &plan.Release{Name: "node-feature-discovery", Namespace: "gpu"}, Skip: "NFD is already installed"},
		{ID: "release-gpu-operator", Release: &plan.Release{Name: "gpu-operator", Namespace: "gpu"}},
		{ID: "wait-clusterpolicy", Target: "policy"},
	}}
	got := installTargets(p, "gpu")
	if len(got.releases) != 1 || got.releases[0].Name != "gpu-operator" || len(got.objects) != 1 || got.objects[0].name != "policy" {
		t.Errorf("%+v", got)
	}
	if none := installTargets(nil, "gpu"); len(none.releases) != 2 || none.objects[0].name != plan.ClusterPolicyName {
		t.Errorf("without a plan: %+v", none)
	}
}
