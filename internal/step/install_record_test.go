package step

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/kube/kubetest"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/runner"
)

func TestRunResult(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"a run that ended well succeeded", nil, "succeeded"},
		{"a run that failed failed", errors.New("wait for the validators: timed out"), "failed"},
		{"an interrupted run was interrupted", &runner.InterruptedError{Count: 3}, "interrupted"},
		{"a cancellation wrapped in a step's error was an interrupt", fmt.Errorf("apply: %w", context.Canceled), "interrupted"},
		{"the run's deadline is a failure", context.DeadlineExceeded, "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runResult(tc.err); got != tc.want {
				t.Errorf("result %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMergePrevious(t *testing.T) {
	rel := func(name string, created bool) record.Object {
		return record.Object{Name: name, Namespace: "gpu-operator", Created: created}
	}
	crd := func(name string, created bool) record.Object { return record.Object{Name: name, Created: created} }
	for _, tc := range []struct {
		name         string
		prev         *record.Record
		now          record.Record
		wantReleases []record.Object
		wantCRDs     []record.Object
	}{
		{"without a previous record, this run's objects are all",
			nil, record.Record{Releases: []record.Object{rel("gpu-operator", true)}, CRDs: []record.Object{crd("b", true), crd("a", false)}},
			[]record.Object{rel("gpu-operator", true)}, []record.Object{crd("a", false), crd("b", true)}},
		{"an object the previous run created stays created though this run found it",
			&record.Record{Releases: []record.Object{rel("gpu-operator", true)}, CRDs: []record.Object{crd("a", true)}},
			record.Record{Releases: []record.Object{rel("gpu-operator", false)}, CRDs: []record.Object{crd("a", false)}},
			[]record.Object{rel("gpu-operator", true)}, []record.Object{crd("a", true)}},
		{"what the previous record names and this run did not see is kept",
			&record.Record{Releases: []record.Object{rel("node-feature-discovery", true)}, CRDs: []record.Object{crd("a", true)}},
			record.Record{Releases: []record.Object{rel("gpu-operator", true)}},
			[]record.Object{rel("gpu-operator", true), rel("node-feature-discovery", true)}, []record.Object{crd("a", true)}},
		{"after an uninstall the old releases are gone but the CRDs it kept are still gpuctl's",
			&record.Record{Uninstalled: true, Releases: []record.Object{rel("node-feature-discovery", true)}, CRDs: []record.Object{crd("a", true)}},
			record.Record{Releases: []record.Object{rel("gpu-operator", false)}, CRDs: []record.Object{crd("a", false)}},
			[]record.Object{rel("gpu-operator", false)}, []record.Object{crd("a", true)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.now
			mergePrevious(&r, tc.prev)
			if !reflect.DeepEqual(r.Releases, tc.wantReleases) {
				t.Errorf("releases %+v, want %+v", r.Releases, tc.wantReleases)
			}
			if !reflect.DeepEqual(r.CRDs, tc.wantCRDs) {
				t.Errorf("CRDs %+v, want %+v", r.CRDs, tc.wantCRDs)
			}
		})
	}
}

// helmWith is a Helm storage in memory holding a deployed release per name, its chart's appVersion the value.
func helmWith(t *testing.T, deployed map[string]string) *release.Client {
	t.Helper()
	cfg := action.NewConfiguration()
	cfg.Releases = storage.Init(driver.NewMemory())
	for name, appVersion := range deployed {
		err := cfg.Releases.Create(&releasev1.Release{Name: name, Namespace: "gpu-operator", Version: 1,
			Info:  &releasev1.Info{Status: rcommon.StatusDeployed},
			Chart: &chart.Chart{Metadata: &chart.Metadata{Name: name, Version: "1.0.0", AppVersion: appVersion}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return release.NewWithConfiguration(cfg, "gpu-operator")
}

func TestRecordReleases(t *testing.T) {
	releaseStep := func(name, appVersion string, values map[string]any) plan.Step {
		return plan.Step{ID: "release-" + name, Kind: plan.KindRelease, Release: &plan.Release{Name: name, AppVersion: appVersion, Values: values}}
	}
	crds := plan.Step{ID: "crds", Kind: plan.KindCRDs, ChartReleases: map[string]string{plan.OperatorRelease: "v26.3.0"}}
	for _, tc := range []struct {
		name         string
		steps        []plan.Step
		deployed     map[string]string
		before       map[string]bool
		wantVersion  string
		wantReleases []record.Object
	}{
		{"the deployed operator's version wins over the planned one",
			[]plan.Step{releaseStep(plan.OperatorRelease, "v26.3.0", nil)}, map[string]string{plan.OperatorRelease: "v26.7.0"}, nil,
			"v26.7.0", []record.Object{{Name: plan.OperatorRelease, Namespace: "gpu-operator", Created: true}}},
		{"a release that existed before the run was found, not created",
			[]plan.Step{releaseStep(plan.OperatorRelease, "v26.7.0", nil)}, map[string]string{plan.OperatorRelease: ""}, map[string]bool{"gpu-operator/" + plan.OperatorRelease: true},
			"v26.7.0", []record.Object{{Name: plan.OperatorRelease, Namespace: "gpu-operator"}}},
		{"a release the run did not get to is not recorded; the planned version is",
			[]plan.Step{releaseStep(plan.NFDRelease, "", nil), releaseStep(plan.OperatorRelease, "v26.7.0", nil)}, map[string]string{plan.NFDRelease: "v0.18.0"}, nil,
			"v26.7.0", []record.Object{{Name: plan.NFDRelease, Namespace: "gpu-operator", Created: true}}},
		{"on OpenShift the version is the starting CSV's",
			[]plan.Step{releaseStep(plan.OperatorPackage, "", map[string]any{"startingCSV": plan.OperatorPackage + ".v26.7.0"})}, nil, nil,
			"v26.7.0", nil},
		{"without an operator release, the operator chart the CRDs came from",
			[]plan.Step{crds, releaseStep(plan.NFDRelease, "", nil)}, nil, nil,
			"v26.3.0", nil},
		{"a skipped release is neither recorded nor versioned",
			[]plan.Step{crds, func() plan.Step { s := releaseStep(plan.OperatorRelease, "v26.7.0", nil); s.Skip = "no"; return s }()}, map[string]string{plan.OperatorRelease: "v26.7.0"}, nil,
			"v26.3.0", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := &executor{plan: &plan.Plan{Namespace: "gpu-operator", Steps: tc.steps},
				releases: release.ClientsOf(map[string]*release.Client{"gpu-operator": helmWith(t, tc.deployed)})}
			r := &record.Record{}
			if err := x.recordReleases(r, &recordBefore{releases: tc.before}); err != nil {
				t.Fatal(err)
			}
			if r.OperatorVersion != tc.wantVersion {
				t.Errorf("operator version %q, want %q", r.OperatorVersion, tc.wantVersion)
			}
			if !reflect.DeepEqual(r.Releases, tc.wantReleases) {
				t.Errorf("releases %+v, want %+v", r.Releases, tc.wantReleases)
			}
		})
	}
}

func TestNodesBefore(t *testing.T) {
	labelled := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{
		"nvidia.com/gpu.present": "true", "kubernetes.io/hostname": "gpu-1"}}}
	plain := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-1", Labels: map[string]string{"kubernetes.io/hostname": "cpu-1"}}}
	kept := map[string]record.NodeMetadata{"gpu-1": {Labels: map[string]string{"nvidia.com/mig.config": "all-1g.10gb"}}}
	for _, tc := range []struct {
		name string
		prev *record.Record
		want map[string]record.NodeMetadata
	}{
		{"a first install reads the nodes' stack labels now", nil,
			map[string]record.NodeMetadata{"gpu-1": {Labels: map[string]string{"nvidia.com/gpu.present": "true"}}}},
		{"an install after an uninstall reads them again", &record.Record{Uninstalled: true, NodeMetadataBefore: kept},
			map[string]record.NodeMetadata{"gpu-1": {Labels: map[string]string{"nvidia.com/gpu.present": "true"}}}},
		{"a later run keeps what the record says was there before the first", &record.Record{NodeMetadataBefore: kept}, kept},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := &executor{clients: &kube.Clients{Kube: fake.NewClientset([]runtime.Object{labelled, plain}...)}}
			got, err := x.nodesBefore(context.Background(), tc.prev)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("metadata before %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The record keeps the UID of every CRD, namespace and other object it names: uninstall --purge
// deletes that object, not another of its name made later.
func TestRecordObjectsKeepTheirUIDs(t *testing.T) {
	secret := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "ngc-secret", "namespace": "gpu-operator", "uid": "secret-uid"}}}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	x := &executor{clients: &kube.Clients{
		Kube:       fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator", UID: "ns-uid"}}),
		Extensions: apiextensionsfake.NewClientset(&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "clusterpolicies.nvidia.com", UID: "crd-uid"}}),
		Dynamic:    dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), secret), Mapper: mapper}}
	ngc := record.Object{APIVersion: "v1", Kind: "Secret", Name: "ngc-secret", Namespace: "gpu-operator"}
	gone := record.Object{APIVersion: "v1", Kind: "Secret", Name: "gone", Namespace: "gpu-operator"}
	b := &recordBefore{crds: map[string]bool{"clusterpolicies.nvidia.com": false, "nvidiadrivers.nvidia.com": false},
		namespaces: map[string]bool{"gpu-operator": false}, objects: map[record.Object]bool{ngc: true, gone: false}}
	r := &record.Record{}
	x.recordObjects(t.Context(), r, b)
	ngc.UID = "secret-uid"
	if want := []record.Object{{Name: "clusterpolicies.nvidia.com", UID: "crd-uid", Created: true}}; !reflect.DeepEqual(r.CRDs, want) {
		t.Errorf("CRDs %+v, want %+v", r.CRDs, want)
	}
	if want := []record.Object{{Name: "gpu-operator", UID: "ns-uid", Created: true}}; !reflect.DeepEqual(r.Namespaces, want) {
		t.Errorf("namespaces %+v, want %+v", r.Namespaces, want)
	}
	if want := []record.Object{ngc}; !reflect.DeepEqual(r.Objects, want) {
		t.Errorf("objects %+v, want %+v (found, with its UID)", r.Objects, want)
	}
}

func TestTheRecordKeepsTheUIDsOfTheCustomResourcesGpuctlCreated(t *testing.T) {
	helm := map[string]string{"meta.helm.sh/release-name": "gpu-operator", "meta.helm.sh/release-namespace": "gpu-operator"}
	now := []runtime.Object{
		kubetest.CustomResource("ClusterPolicy", "cluster-policy", "cp-new", helm),
		kubetest.CustomResource("ClusterPolicy", "found", "cp-found", helm),
		kubetest.CustomResource("NVIDIADriver", "team-a", "drv-team", nil),
		kubetest.CustomResource("NVIDIADriver", "earlier", "drv-earlier", nil),
	}
	p := &plan.Plan{Namespace: "gpu-operator", Steps: []plan.Step{{Kind: plan.KindRelease, Release: &plan.Release{Name: "gpu-operator"}}}}
	for _, tc := range []struct {
		name string
		prev *record.Record
		want []types.UID
	}{
		{"a first install records what it created and its releases made, not what was there or someone else made", nil, []types.UID{"cp-new"}},
		{"a later run keeps what an earlier one recorded",
			&record.Record{TracksCustomResources: true, CustomResources: []record.Object{{UID: "drv-earlier"}, {UID: "gone"}}}, []types.UID{"cp-new", "drv-earlier"}},
		{"over a record of an older gpuctl, what its releases made counts even if it was there before",
			&record.Record{}, []types.UID{"cp-new", "cp-found"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := &executor{clients: &kube.Clients{Dynamic: stackDynamicClient(now...)}, plan: p}
			b := &recordBefore{prev: tc.prev, customResources: map[types.UID]bool{"cp-found": true, "drv-earlier": true}}
			got, err := x.recordCustomResources(t.Context(), b)
			if err != nil {
				t.Fatal(err)
			}
			var uids []types.UID
			for _, o := range got {
				uids = append(uids, o.UID)
			}
			slices.Sort(uids)
			if want := slices.Sorted(slices.Values(tc.want)); !slices.Equal(uids, want) {
				t.Errorf("recorded %v, want %v", uids, want)
			}
		})
	}
}

// stackDynamicClient serves the stack's custom resource kinds (record.StackResources) with objs.
func stackDynamicClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	kinds := map[schema.GroupVersionResource]string{}
	for _, r := range record.StackResources() {
		kinds[r.GVR] = r.Kind + "List"
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds, objs...)
}
