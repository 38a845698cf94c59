package e2e

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/e2e/upstream"
	"github.com/gpuctl/gpuctl/internal/kube"
)

// TestEachOperatorReleaseRunsItsOwnController installs the releases gpuctl offers besides the default
// (which every TestInstallWithNoFlags case installs) and proves each is that release end to end: its
// templates and CRDs, its real controller built from NVIDIA's sources, Reconciled. One GKE sandbox per
// release, and OpenShift's OLM path once for an older release.
func TestEachOperatorReleaseRunsItsOwnController(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		distro, version string
		crds            []string
	}{
		{"gke", "v26.3.3", []string{"clusterpolicies.nvidia.com", "nvidiadrivers.nvidia.com"}},
		{"gke", "v25.10.1", []string{"clusterpolicies.nvidia.com", "nvidiadrivers.nvidia.com"}},
		{"openshift", "v26.3.3", nil},
	} {
		t.Run(tc.distro+" "+tc.version, func(t *testing.T) {
			c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: tc.distro, GPUNodes: 2, CPUNodes: 1}})
			res, _ := installJSON(t, c, "--operator-version", tc.version)
			assertReconciled(t, c, res.Plan.Step("wait-clusterpolicy").Target)
			assertRealController(t, c, tc.version)
			if tc.distro == "openshift" {
				sub, err := dynamicClient(t, c).Resource(schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "subscriptions"}).
					Namespace("nvidia-gpu-operator").Get(t.Context(), "gpu-operator-certified", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want := "gpu-operator-certified." + tc.version
				if got, _, _ := unstructured.NestedString(sub.Object, "spec", "startingCSV"); got != want {
					t.Errorf("subscription startingCSV %q, want %q", got, want)
				}
				if got, _, _ := unstructured.NestedString(sub.Object, "status", "installedCSV"); got != want {
					t.Errorf("installed CSV %q, want %q", got, want)
				}
				return
			}
			t.Run("the Helm release is the release's chart, and its CRDs are exactly the release's", func(t *testing.T) {
				var found bool
				for _, r := range res.Releases {
					if r.Name == "gpu-operator" {
						found = true
						if r.AppVersion != tc.version || r.ChartVersion != strings.TrimPrefix(tc.version, "v") {
							t.Errorf("release gpu-operator is chart %s appVersion %s", r.ChartVersion, r.AppVersion)
						}
					}
				}
				if !found {
					t.Errorf("no gpu-operator release in %+v", res.Releases)
				}
				if got := nvidiaCRDNames(t, c); !slices.Equal(got, tc.crds) {
					t.Errorf("nvidia.com CRDs %v, want %v", got, tc.crds)
				}
				crd, err := apiextensionsclient.NewForConfigOrDie(c.Config).ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), "clusterpolicies.nvidia.com", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := crd.Annotations[kube.CRDVersionAnnotation]; got != tc.version {
					t.Errorf("ClusterPolicy CRD stamped %q, want %s", got, tc.version)
				}
			})
		})
	}
}

// nvidiaChartCRDs reads the CRDs of NVIDIA's own chart of a release (deployments/gpu-operator/crds in
// its sources), as `helm install nvidia/gpu-operator` would create them.
func nvidiaChartCRDs(t *testing.T, tag string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	dir := filepath.Join(upstream.TreeT(t, tag), "deployments", "gpu-operator", "crds")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s: %v", dir, err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(b, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, crd)
	}
	return out
}

// schemaPaths lists every property path a CRD's schemas accept ("v1.spec.driver.enabled").
func schemaPaths(crd *apiextensionsv1.CustomResourceDefinition) map[string]bool {
	out := map[string]bool{}
	var walk func(s *apiextensionsv1.JSONSchemaProps, prefix string)
	walk = func(s *apiextensionsv1.JSONSchemaProps, prefix string) {
		for name, p := range s.Properties {
			out[prefix+"."+name] = true
			walk(&p, prefix+"."+name)
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(s.Items.Schema, prefix+"[]")
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			walk(s.AdditionalProperties.Schema, prefix+".*")
		}
	}
	for _, v := range crd.Spec.Versions {
		if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			walk(v.Schema.OpenAPIV3Schema, v.Name)
		}
	}
	return out
}

// TestNVIDIAsCRDsAreNeverNarrowed: NVIDIA's v26.7.0 CRDs are already there (someone ran NVIDIA's chart
// or kubectl before), then gpuctl installs. Every schema path NVIDIA's CRDs accept is still accepted
// afterwards, so the API server prunes nothing from anyone's objects; the same release installs and
// reaches Reconciled, and an older release asked for keeps the newer CRDs and says so.
func TestNVIDIAsCRDsAreNeverNarrowed(t *testing.T) {
	t.Parallel()
	nvidia := nvidiaChartCRDs(t, "v26.7.0")
	preApply := func(t *testing.T, c *sandbox.Cluster) map[string]map[string]bool {
		t.Helper()
		ext := apiextensionsclient.NewForConfigOrDie(c.Config)
		before := map[string]map[string]bool{}
		for _, crd := range nvidia {
			if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), crd.DeepCopy(), metav1.CreateOptions{FieldManager: "helm"}); err != nil {
				t.Fatal(err)
			}
			if err := kube.WaitCRDEstablished(t.Context(), ext, crd.Name); err != nil {
				t.Fatal(err)
			}
			before[crd.Name] = schemaPaths(crd)
		}
		return before
	}
	assertNotNarrowed := func(t *testing.T, c *sandbox.Cluster, before map[string]map[string]bool) {
		t.Helper()
		ext := apiextensionsclient.NewForConfigOrDie(c.Config)
		for _, name := range slices.Sorted(maps.Keys(before)) {
			crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("CRD %s: %v", name, err)
				continue
			}
			after := schemaPaths(crd)
			var lost []string
			for p := range before[name] {
				if !after[p] {
					lost = append(lost, p)
				}
			}
			slices.Sort(lost)
			if len(lost) > 0 {
				t.Errorf("CRD %s lost %d of %d schema paths, e.g. %v", name, len(lost), len(before[name]), lost[:min(5, len(lost))])
			}
		}
	}

	t.Run("the same release: gpuctl installs over NVIDIA's CRDs and reaches Reconciled", func(t *testing.T) {
		c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1}})
		before := preApply(t, c)
		res, _ := installJSON(t, c)
		assertNotNarrowed(t, c, before)
		assertReconciled(t, c, res.Plan.Step("wait-clusterpolicy").Target)
		assertRealController(t, c, "v26.7.0")
	})

	t.Run("an older release keeps the newer CRDs and says so", func(t *testing.T) {
		c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 1}})
		before := preApply(t, c)
		res, stderr := installJSON(t, c, "--operator-version", "v25.10.1")
		assertNotNarrowed(t, c, before)
		for _, name := range []string{"clusterpolicies.nvidia.com", "nvidiadrivers.nvidia.com"} {
			if !strings.Contains(stderr, "kept CRD "+name) {
				t.Errorf("no warning that %s was kept:\n%s", name, stderr)
			}
		}
		assertReconciled(t, c, res.Plan.Step("wait-clusterpolicy").Target)
		assertRealController(t, c, "v25.10.1")
	})
}

// nvidiaCRDNames lists the nvidia.com CRDs the cluster serves.
func nvidiaCRDNames(t *testing.T, c *sandbox.Cluster) []string {
	t.Helper()
	var out []string
	for _, name := range crdNames(t, c) {
		if strings.HasSuffix(name, ".nvidia.com") {
			out = append(out, name)
		}
	}
	return out
}
