package charts

import (
	"bytes"
	"flag"
	"fmt"
	gpurelease "github.com/gpuctl/gpuctl/internal/release"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/engine"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/internal/plan"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

const (
	nfdChart = "node-feature-discovery"
	gpuChart = "gpu-operator"
	// installerChart is the optional chart of Google's driver installer for GKE (Optional()).
	installerChart = "gke-driver-installer"
	// nfdSection is the key of a GPU Operator values file whose contents are the NFD release's values
	// (NVIDIA's subchart key, deployments/gpu-operator/values.yaml at v26.7.0); every other key belongs to
	// the gpu-operator release.
	nfdSection = "node-feature-discovery"
)

// release describes how the tests install each chart: the names gpuctl would use.
var release = map[string]common.ReleaseOptions{
	nfdChart: {Name: "node-feature-discovery", Namespace: "gpu-operator", IsInstall: true, Revision: 1},
	gpuChart: {Name: "gpu-operator", Namespace: "gpu-operator", IsInstall: true, Revision: 1},
	// In the operator namespace, where the gke profile's ResourceQuota admits system-node-critical pods.
	installerChart: {Name: "gke-driver-installer", Namespace: "gpu-operator", IsInstall: true, Revision: 1},
	// In the operator namespace, next to the ServiceMonitors the operator creates (monitoring_test.go).
	monitoringChart: {Name: "gpu-monitoring", Namespace: "gpu-operator", IsInstall: true, Revision: 1},
}

// installerCases are the golden renders of the GKE driver installer, one per node image.
var installerCases = []struct {
	name string
	vals map[string]any
}{
	{"cos", map[string]any{"variant": "cos"}},
	{"ubuntu", map[string]any{"variant": "ubuntu"}},
}

// capabilities is a Kubernetes 1.33 cluster (the floor of GPU Operator v26.7.0's platform support) serving
// the built-in APIs; extra adds API versions such as "monitoring.coreos.com/v1/ServiceMonitor".
func capabilities(t *testing.T, extra ...string) *common.Capabilities {
	t.Helper()
	kv, err := common.ParseKubeVersion("v1.33.0")
	if err != nil {
		t.Fatal(err)
	}
	return &common.Capabilities{
		KubeVersion: *kv,
		APIVersions: append(slices.Clone(common.DefaultVersionSet), extra...),
		HelmVersion: common.DefaultCapabilities.HelmVersion,
	}
}

func mustLoad(t *testing.T, name string) *chart.Chart {
	t.Helper()
	c, err := gpurelease.LoadChart(FS, name)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return c
}

// render renders chart name with user values vals, as `helm install` would (schema validation
// included), and returns the manifests by template path; empty ones are dropped.
func render(t *testing.T, name string, vals map[string]any, caps *common.Capabilities) (map[string]string, error) {
	t.Helper()
	c := mustLoad(t, name)
	top, err := util.ToRenderValues(c, vals, release[name], caps)
	if err != nil {
		return nil, err
	}
	out, err := engine.Render(c, top)
	if err != nil {
		return nil, err
	}
	for path, manifest := range out {
		if strings.TrimSpace(manifest) == "" || strings.HasSuffix(path, "NOTES.txt") {
			delete(out, path)
		}
	}
	return out, nil
}

func mustRender(t *testing.T, name string, vals map[string]any, caps *common.Capabilities) map[string]string {
	t.Helper()
	out, err := render(t, name, vals, caps)
	if err != nil {
		t.Fatalf("render %s: %v", name, err)
	}
	return out
}

// joined concatenates manifests in template order, each under a "# Source:" line, like `helm template`.
func joined(manifests map[string]string) string {
	paths := make([]string, 0, len(manifests))
	for p := range manifests {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", p, strings.Trim(manifests[p], "\n"))
	}
	return b.String()
}

// objects decodes every YAML document of the manifests into a generic object, with integers as int64
// as the API server would decode them.
func objects(t *testing.T, manifests map[string]string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for _, doc := range strings.Split(joined(manifests), "\n---\n") {
		if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" {
			continue
		}
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		var obj map[string]any
		if err := utiljson.Unmarshal(js, &obj); err != nil {
			t.Fatal(err)
		}
		if obj != nil {
			objs = append(objs, obj)
		}
	}
	return objs
}

// find returns the rendered object of the given kind and name, failing the test if there is none.
func find(t *testing.T, objs []map[string]any, kind, name string) map[string]any {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == kind && field[string](o, "metadata", "name") == name {
			return o
		}
	}
	t.Fatalf("no %s %q rendered", kind, name)
	return nil
}

// field walks obj along path (map keys, or ints for list indexes) and returns the value as T, or T's
// zero value when the path does not exist.
func field[T any](obj any, path ...any) T {
	var zero T
	cur := obj
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return zero
			}
			cur = m[k]
		case int:
			l, ok := cur.([]any)
			if !ok || k >= len(l) {
				return zero
			}
			cur = l[k]
		}
	}
	v, _ := cur.(T)
	return v
}

// renderCase is one values file, split as gpuctl splits a profile: the node-feature-discovery section
// goes to the NFD release, the rest to the gpu-operator release.
type renderCase struct {
	name   string
	gpu    map[string]any
	nfd    map[string]any
	hasNFD bool // the case says something about NFD, so the NFD chart gets a golden file of its own
}

func splitValues(t *testing.T, name string, data []byte) renderCase {
	t.Helper()
	vals := map[string]any{}
	if err := yaml.Unmarshal(data, &vals); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	rc := renderCase{name: name, gpu: vals, nfd: map[string]any{}}
	if section, ok := vals[nfdSection]; ok {
		m, ok := section.(map[string]any)
		if !ok {
			t.Fatalf("%s: %s is not a map", name, nfdSection)
		}
		rc.nfd, rc.hasNFD = m, true
		delete(vals, nfdSection)
	}
	return rc
}

// cases are the defaults, every testdata/values/*.yaml, and every profile in ../profiles (written in
// NVIDIA's value keys by the profile package), if that directory exists.
func cases(t *testing.T) []renderCase {
	t.Helper()
	all := []renderCase{{name: "defaults", gpu: map[string]any{}, nfd: map[string]any{}, hasNFD: true}}
	for _, dir := range []struct{ glob, prefix string }{
		{filepath.Join("testdata", "values", "*.yaml"), ""},
		{filepath.Join("..", "profiles", "*.yaml"), "profile-"},
	} {
		files, err := filepath.Glob(dir.glob)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rc := splitValues(t, dir.prefix+strings.TrimSuffix(filepath.Base(f), ".yaml"), data)
			if dir.prefix == "profile-" {
				// gpuctl applies a profile's extraObjects itself, before NFD, and passes the rest of
				// the profile to the chart (internal/plan).
				delete(rc.gpu, "extraObjects")
			}
			all = append(all, rc)
		}
	}
	return all
}

func goldenPath(chartName, caseName string) string {
	return filepath.Join("testdata", chartName, caseName+".golden.yaml")
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./charts/ -update to create it)", err)
	}
	if !bytes.Equal(want, []byte(got)) {
		t.Errorf("render differs from %s (run go test ./charts/ -update and review the diff):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff shows the first lines where want and got differ, enough to spot a change.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 20; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n- %s\n+ %s\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}

func TestEmbeddedChartsLoadWithTheirMetadata(t *testing.T) {
	want := map[string]struct{ version, appVersion string }{
		nfdChart: {"0.19.0", "v0.19.0"},
		gpuChart: {"26.7.0", "v26.7.0"},
	}
	if got := Names(); !slices.Equal(got, []string{nfdChart, gpuChart}) {
		t.Fatalf("Names() = %v, want NFD before the GPU Operator", got)
	}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			c := mustLoad(t, name)
			if c.Name() != name || c.Metadata.Version != want[name].version || c.Metadata.AppVersion != want[name].appVersion {
				t.Errorf("chart %s %s (app %s), want %s %s (app %s)", c.Name(), c.Metadata.Version, c.Metadata.AppVersion,
					name, want[name].version, want[name].appVersion)
			}
			if c.Schema == nil {
				t.Error("values.schema.json is not embedded")
			}
			if !slices.ContainsFunc(c.Templates, func(f *common.File) bool { return f.Name == "templates/_helpers.tpl" }) {
				t.Error("templates/_helpers.tpl is not embedded (go:embed needs the all: prefix)")
			}
			if len(c.CRDObjects()) == 0 {
				t.Error("no CRDs under crds/")
			}
		})
	}
	if _, err := gpurelease.LoadChart(FS, "no-such-chart"); err == nil {
		t.Error("Load of an unknown chart succeeded")
	}
}

// TestRenderMatchesGolden renders every case and compares it with testdata/<chart>/<case>.golden.yaml,
// then checks what must hold for any values: labels, parseable objects, CRs the CRDs accept.
func TestRenderMatchesGolden(t *testing.T) {
	crds := loadCRDs(t)
	used := map[string]bool{}
	for _, rc := range cases(t) {
		used[goldenPath(gpuChart, rc.name)] = true
		if rc.hasNFD {
			used[goldenPath(nfdChart, rc.name)] = true
		}
		t.Run(rc.name, func(t *testing.T) {
			charts := []struct {
				name string
				vals map[string]any
			}{{gpuChart, rc.gpu}}
			if rc.hasNFD {
				charts = append(charts, struct {
					name string
					vals map[string]any
				}{nfdChart, rc.nfd})
			}
			for _, ch := range charts {
				// A cluster that serves MutatingAdmissionPolicy at v1, so the value alone decides.
				manifests := mustRender(t, ch.name, ch.vals, capabilities(t, mapKind))
				checkGolden(t, goldenPath(ch.name, rc.name), joined(manifests))
				objs := objects(t, manifests)
				checkStandardLabels(t, ch.name, objs)
				checkCustomResources(t, crds, objs)
			}
		})
	}
	for _, ic := range installerCases {
		used[goldenPath(installerChart, ic.name)] = true
		t.Run(installerChart+"/"+ic.name, func(t *testing.T) {
			manifests := mustRender(t, installerChart, ic.vals, capabilities(t))
			checkGolden(t, goldenPath(installerChart, ic.name), joined(manifests))
			checkStandardLabels(t, installerChart, objects(t, manifests))
		})
	}
	for _, mc := range monitoringCases {
		used[goldenPath(monitoringChart, mc.name)] = true
		t.Run(monitoringChart+"/"+mc.name, func(t *testing.T) {
			manifests := mustRender(t, monitoringChart, mc.vals, capabilities(t))
			checkGolden(t, goldenPath(monitoringChart, mc.name), joined(manifests))
			checkStandardLabels(t, monitoringChart, objects(t, manifests))
		})
	}
	// A golden file without a case is a leftover that no longer tests anything.
	stale, _ := filepath.Glob(filepath.Join("testdata", "*", "*.golden.yaml"))
	for _, p := range stale {
		if used[p] {
			continue
		}
		if *update {
			_ = os.Remove(p)
			continue
		}
		t.Errorf("%s has no case any more (run go test ./charts/ -update to remove it)", p)
	}
}

// checkStandardLabels asserts the Kubernetes recommended labels on every object, so gpuctl (and
// users) can find everything a release created.
func checkStandardLabels(t *testing.T, chartName string, objs []map[string]any) {
	t.Helper()
	if len(objs) == 0 {
		t.Fatalf("%s rendered no objects", chartName)
	}
	for _, o := range objs {
		labels := field[map[string]any](o, "metadata", "labels")
		id := fmt.Sprintf("%s %s", o["kind"], field[string](o, "metadata", "name"))
		for _, key := range []string{"helm.sh/chart", "app.kubernetes.io/name", "app.kubernetes.io/instance",
			"app.kubernetes.io/version", "app.kubernetes.io/managed-by"} {
			if v, _ := labels[key].(string); v == "" {
				t.Errorf("%s: %s has no %s label", chartName, id, key)
			}
		}
		if got := labels["app.kubernetes.io/instance"]; got != release[chartName].Name {
			t.Errorf("%s: %s has instance label %v, want the release name %s", chartName, id, got, release[chartName].Name)
		}
	}
}

func TestClusterPolicyCarriesTheValues(t *testing.T) {
	tests := []struct {
		name  string
		vals  string
		check func(t *testing.T, spec map[string]any)
	}{
		{"defaults deploy the v26.7.0 bundle with the driver", "", func(t *testing.T, spec map[string]any) {
			expect(t, spec, true, "driver", "enabled")
			expect(t, spec, "nvcr.io/nvidia", "driver", "repository")
			expect(t, spec, "595.91.07", "driver", "version")
			expect(t, spec, "v0.12.0", "driver", "manager", "version")
			expect(t, spec, "v1.20.0", "toolkit", "version")
			expect(t, spec, "v0.20.0", "devicePlugin", "version")
			expect(t, spec, "v0.20.0", "gfd", "version")
			expect(t, spec, "4.6.0-4.8.3-distroless", "dcgmExporter", "version")
			expect(t, spec, "v0.15.0", "migManager", "version")
			expect(t, spec, "gpu-operator", "validator", "image")
			expect(t, spec, "v26.7.0", "validator", "version")
			expect(t, spec, false, "driver", "useNvidiaDriverCRD")
			expect(t, spec, true, "cdi", "enabled")
			expect(t, spec, "nvidia", "operator", "runtimeClass")
			expect(t, spec, "nvidia.com/gpu", "daemonsets", "tolerations", 0, "key")
			expect(t, spec, "Exists", "daemonsets", "tolerations", 0, "operator")
			expect(t, spec, "gpu-operator", "daemonsets", "labels", "app.kubernetes.io/managed-by")
			expect(t, spec, "/run/nvidia/driver", "hostPaths", "driverInstallDir")
			expect(t, spec, "/usr/local/nvidia", "toolkit", "installDir")
		}},
		{"driver disabled reaches spec.driver.enabled", "driver: {enabled: false}", func(t *testing.T, spec map[string]any) {
			expect(t, spec, false, "driver", "enabled")
		}},
		{"the NVIDIADriver switch is renamed for the CR", "driver: {nvidiaDriverCRD: {enabled: true}}", func(t *testing.T, spec map[string]any) {
			expect(t, spec, true, "driver", "useNvidiaDriverCRD")
		}},
		{"toolkit env and install dir pass through", "toolkit: {installDir: /home/kubernetes/bin/nvidia, env: [{name: CONTAINERD_SOCKET, value: /run/k3s/containerd/containerd.sock}]}",
			func(t *testing.T, spec map[string]any) {
				expect(t, spec, "/home/kubernetes/bin/nvidia", "toolkit", "installDir")
				expect(t, spec, "CONTAINERD_SOCKET", "toolkit", "env", 0, "name")
				expect(t, spec, "/run/k3s/containerd/containerd.sock", "toolkit", "env", 0, "value")
			}},
		{"gpuPodDeletion becomes the CR's podDeletion", "driver: {upgradePolicy: {gpuPodDeletion: {force: true}}}", func(t *testing.T, spec map[string]any) {
			expect(t, spec, true, "driver", "upgradePolicy", "podDeletion", "force")
			expect(t, spec, int64(300), "driver", "upgradePolicy", "podDeletion", "timeoutSeconds")
		}},
		{"a numeric maxUnavailable stays a string", "daemonsets: {rollingUpdate: {maxUnavailable: 2}}", func(t *testing.T, spec map[string]any) {
			expect(t, spec, "2", "daemonsets", "rollingUpdate", "maxUnavailable")
		}},
		{"an upgrade policy's maxUnavailable of 2 stays an integer", "driver: {upgradePolicy: {maxUnavailable: 2}}", func(t *testing.T, spec map[string]any) {
			expect(t, spec, int64(2), "driver", "upgradePolicy", "maxUnavailable")
		}},
		{"an upgrade policy's maxUnavailable of 25% stays a string", "driver: {upgradePolicy: {maxUnavailable: 25%}}", func(t *testing.T, spec map[string]any) {
			expect(t, spec, "25%", "driver", "upgradePolicy", "maxUnavailable")
		}},
		{"hostNetwork reaches the operands that ask for it", "dcgmExporter: {hostNetwork: true}\ntoolkit: {hostNetwork: true}", func(t *testing.T, spec map[string]any) {
			expect(t, spec, true, "dcgmExporter", "hostNetwork")
			expect(t, spec, true, "toolkit", "hostNetwork")
			expect(t, spec, false, "devicePlugin", "hostNetwork")
		}},
		{"ccManager.defaultMode defaults to on in v26.7.0", "", func(t *testing.T, spec map[string]any) {
			expect(t, spec, "on", "ccManager", "defaultMode")
			expect(t, spec, true, "ccManager", "enabled")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := map[string]any{}
			if err := yaml.Unmarshal([]byte(tt.vals), &vals); err != nil {
				t.Fatal(err)
			}
			cp := find(t, objects(t, mustRender(t, gpuChart, vals, capabilities(t))), "ClusterPolicy", "cluster-policy")
			if cp["apiVersion"] != "nvidia.com/v1" {
				t.Errorf("apiVersion %v, want nvidia.com/v1", cp["apiVersion"])
			}
			tt.check(t, field[map[string]any](cp, "spec"))
		})
	}
}

// expect asserts the value at path (the zero value stands for "absent").
func expect(t *testing.T, obj map[string]any, want any, path ...any) {
	t.Helper()
	got := field[any](obj, path...)
	if got == nil {
		switch want.(type) {
		case bool:
			got = false
		case string:
			got = ""
		}
	}
	if got != want {
		t.Errorf("spec.%v = %#v, want %#v", path, got, want)
	}
}

// TestServiceMonitorIsLeftAsTheValuesSay: the v26.7.0 operator creates the dcgm-exporter ServiceMonitor
// only while the cluster serves monitoring.coreos.com/v1 (controllers/object_controls.go at v26.7.0), so
// the chart passes the user's choice (or the release's default, true in v26.7.0) whatever the cluster
// serves at render time, and a Prometheus Operator installed later is picked up.
func TestServiceMonitorIsLeftAsTheValuesSay(t *testing.T) {
	prometheus := []string{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor"}
	tests := []struct {
		name string
		vals string
		apis []string
		want bool
	}{
		{"the v26.7.0 default asks for it on a cluster without the Prometheus Operator", "", nil, true},
		{"the v26.7.0 default asks for it on a cluster with the Prometheus Operator", "", prometheus, true},
		{"turned off it stays off where the cluster serves ServiceMonitors", "dcgmExporter: {serviceMonitor: {enabled: false}}", prometheus, false},
		{"turned on it stays on where the cluster does not serve them", "dcgmExporter: {serviceMonitor: {enabled: true}}", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := map[string]any{}
			if err := yaml.Unmarshal([]byte(tt.vals), &vals); err != nil {
				t.Fatal(err)
			}
			objs := objects(t, mustRender(t, gpuChart, vals, capabilities(t, tt.apis...)))
			cp := find(t, objs, "ClusterPolicy", "cluster-policy")
			if got := field[bool](cp, "spec", "dcgmExporter", "serviceMonitor", "enabled"); got != tt.want {
				t.Errorf("spec.dcgmExporter.serviceMonitor.enabled = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOperatorDeploymentMatchesNVIDIAs(t *testing.T) {
	objs := objects(t, mustRender(t, gpuChart, nil, capabilities(t)))
	d := find(t, objs, "Deployment", "gpu-operator")
	for _, key := range []string{"app", "app.kubernetes.io/component"} {
		if got := field[string](d, "metadata", "labels", key); got != "gpu-operator" {
			t.Errorf("Deployment label %s = %q, want gpu-operator", key, got)
		}
		if got := field[string](d, "spec", "template", "metadata", "labels", key); got != "gpu-operator" {
			t.Errorf("pod label %s = %q, want gpu-operator", key, got)
		}
	}
	pod := field[map[string]any](d, "spec", "template", "spec")
	if pod["serviceAccountName"] != "gpu-operator" || pod["priorityClassName"] != "system-node-critical" {
		t.Errorf("serviceAccountName %v, priorityClassName %v", pod["serviceAccountName"], pod["priorityClassName"])
	}
	c := field[map[string]any](pod, "containers", 0)
	if c["image"] != "nvcr.io/nvidia/gpu-operator:v26.7.0" {
		t.Errorf("operator image %v", c["image"])
	}
	env := map[string]any{}
	for _, e := range field[[]any](c, "env") {
		m := e.(map[string]any)
		if v, ok := m["value"]; ok {
			env[m["name"].(string)] = v
		} else {
			env[m["name"].(string)] = field[string](m, "valueFrom", "fieldRef", "fieldPath")
		}
	}
	for name, want := range map[string]string{
		"OPERATOR_NAMESPACE":   "metadata.namespace",
		"DRIVER_MANAGER_IMAGE": "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0",
		"VALIDATOR_IMAGE":      "nvcr.io/nvidia/gpu-operator:v26.7.0",
	} {
		if env[name] != want {
			t.Errorf("env %s = %v, want %s", name, env[name], want)
		}
	}
	tols := field[[]any](pod, "tolerations")
	if len(tols) != 1 || field[string](tols, 0, "key") != "node-role.kubernetes.io/control-plane" {
		t.Errorf("tolerations = %v, want only the control-plane one (operator.tolerations of values.yaml at v26.7.0)", tols)
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		if got := field[int64](c, probe, "httpGet", "port"); got != 8081 {
			t.Errorf("%s on port %v, want 8081", probe, c[probe])
		}
	}
}

// TestOperatorRBACCoversWhatItGrants checks the escalation rule the API server applies: the operator
// can only create the operand (Cluster)Roles of the operator build the sandbox runs if its own rules
// cover every rule in them. The operand roles' rules are those of assets/*/0200_role.yaml and
// 0210_clusterrole.yaml in module d73a0086.
func TestOperatorRBACCoversWhatItGrants(t *testing.T) {
	objs := objects(t, mustRender(t, gpuChart, nil, capabilities(t)))
	cluster := rules(find(t, objs, "ClusterRole", "gpu-operator"))
	namespaced := append(rules(find(t, objs, "Role", "gpu-operator")), cluster...)
	grantedCluster := []rule{
		{"", "nodes", "get"}, {"", "nodes", "list"}, {"", "nodes", "watch"}, {"", "nodes", "update"}, {"", "nodes", "patch"},
		{"", "pods", "get"}, {"", "pods", "list"}, {"", "pods", "watch"}, {"", "pods/eviction", "create"},
		{"apps", "daemonsets", "get"}, {"config.openshift.io", "clusterversions", "get"}, {"config.openshift.io", "clusterversions", "list"},
		{"nvidia.com", "clusterpolicies/finalizers", "update"}, {"nvidia.com", "nvidiadrivers/finalizers", "delete"},
		{"security.openshift.io", "securitycontextconstraints", "use"},
	}
	grantedNamespace := []rule{
		{"", "pods", "create"}, {"", "pods", "delete"}, {"", "pods", "patch"}, {"", "configmaps", "get"}, {"", "secrets", "watch"},
		{"", "services", "list"}, {"", "endpoints", "watch"}, {"apps", "daemonsets", "watch"},
	}
	// What the controller itself does: watch ClusterPolicies and nodes, write status, manage its operands.
	used := []rule{
		{"nvidia.com", "clusterpolicies", "watch"}, {"nvidia.com", "clusterpolicies/status", "update"},
		{"nvidia.com", "nvidiadrivers", "watch"}, {"node.k8s.io", "runtimeclasses", "create"},
		{"apiextensions.k8s.io", "customresourcedefinitions", "get"}, {"scheduling.k8s.io", "priorityclasses", "create"},
		{"rbac.authorization.k8s.io", "clusterroles", "create"}, {"", "namespaces", "patch"},
	}
	usedNamespace := []rule{
		{"apps", "daemonsets", "create"}, {"", "serviceaccounts", "create"}, {"rbac.authorization.k8s.io", "roles", "create"},
		{"", "services", "create"}, {"coordination.k8s.io", "leases", "update"}, {"monitoring.coreos.com", "servicemonitors", "create"},
		{"apps", "controllerrevisions", "list"},
	}
	for _, r := range append(grantedCluster, used...) {
		if !allows(cluster, r) {
			t.Errorf("ClusterRole gpu-operator lacks %v", r)
		}
	}
	for _, r := range append(grantedNamespace, usedNamespace...) {
		if !allows(namespaced, r) {
			t.Errorf("Role+ClusterRole gpu-operator lack %v in the operator namespace", r)
		}
	}
}

type rule struct{ group, resource, verb string }

func rules(role map[string]any) []rule {
	var out []rule
	for _, r := range field[[]any](role, "rules") {
		for _, g := range field[[]any](r, "apiGroups") {
			for _, res := range field[[]any](r, "resources") {
				for _, v := range field[[]any](r, "verbs") {
					out = append(out, rule{g.(string), res.(string), v.(string)})
				}
			}
		}
	}
	return out
}

func allows(have []rule, want rule) bool {
	return slices.ContainsFunc(have, func(r rule) bool {
		return r.group == want.group && (r.resource == want.resource || r.resource == "*") && (r.verb == want.verb || r.verb == "*")
	})
}

func TestNFDWorkerLabelsNVIDIAGPUsByVendor(t *testing.T) {
	objs := objects(t, mustRender(t, nfdChart, nil, capabilities(t)))
	const fullname = "node-feature-discovery"

	cm := find(t, objs, "ConfigMap", fullname+"-worker-conf")
	var conf struct {
		Sources struct {
			PCI struct {
				DeviceClassWhitelist []string `json:"deviceClassWhitelist"`
				DeviceLabelFields    []string `json:"deviceLabelFields"`
			} `json:"pci"`
		} `json:"sources"`
	}
	if err := yaml.UnmarshalStrict([]byte(field[string](cm, "data", "nfd-worker.conf")), &conf); err != nil {
		t.Fatalf("nfd-worker.conf: %v", err)
	}
	// NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0 (key node-feature-discovery): the GPU Operator's values, which yield feature.node.kubernetes.io/pci-10de.present.
	if want := []string{"02", "0200", "0207", "0300", "0302"}; !slices.Equal(conf.Sources.PCI.DeviceClassWhitelist, want) {
		t.Errorf("deviceClassWhitelist = %v, want %v", conf.Sources.PCI.DeviceClassWhitelist, want)
	}
	if want := []string{"vendor"}; !slices.Equal(conf.Sources.PCI.DeviceLabelFields, want) {
		t.Errorf("deviceLabelFields = %v, want %v", conf.Sources.PCI.DeviceLabelFields, want)
	}

	ds := find(t, objs, "DaemonSet", fullname+"-worker")
	pod := field[map[string]any](ds, "spec", "template", "spec")
	worker := field[map[string]any](pod, "containers", 0)
	if got := field[string](worker, "command", 0); got != "nfd-worker" {
		t.Errorf("worker command %q", got)
	}
	var confVolume string
	for _, v := range field[[]any](pod, "volumes") {
		if field[string](v, "configMap", "name") == fullname+"-worker-conf" {
			confVolume = field[string](v, "name")
		}
	}
	mounted := slices.ContainsFunc(field[[]any](worker, "volumeMounts"), func(m any) bool {
		return field[string](m, "name") == confVolume && field[string](m, "mountPath") == "/etc/kubernetes/node-feature-discovery"
	})
	if confVolume == "" || !mounted {
		t.Errorf("the worker-conf ConfigMap is not mounted at /etc/kubernetes/node-feature-discovery")
	}
	tolerates := func(pod map[string]any, key, op string) bool {
		return slices.ContainsFunc(field[[]any](pod, "tolerations"), func(tol any) bool {
			return field[string](tol, "key") == key && field[string](tol, "operator") == op && field[string](tol, "effect") == "NoSchedule"
		})
	}
	if !tolerates(pod, "nvidia.com/gpu", "Exists") || !tolerates(pod, "node-role.kubernetes.io/control-plane", "Equal") {
		t.Errorf("worker tolerations %v, want nvidia.com/gpu Exists and control-plane ("+
			"NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0)", pod["tolerations"])
	}

	for name, program := range map[string]string{fullname + "-master": "nfd-master", fullname + "-gc": "nfd-gc"} {
		d := find(t, objs, "Deployment", name)
		if got := field[string](d, "spec", "template", "spec", "containers", 0, "command", 0); got != program {
			t.Errorf("%s runs %q, want %s", name, got, program)
		}
		if got := field[string](d, "spec", "template", "spec", "containers", 0, "image"); got != "registry.k8s.io/nfd/node-feature-discovery:v0.19.0" {
			t.Errorf("%s image %q", name, got)
		}
	}
	master := find(t, objs, "ConfigMap", fullname+"-master-conf")
	if !strings.Contains(field[string](master, "data", "nfd-master.conf"), "nvidia.com") {
		t.Errorf("nfd-master.conf does not allow the nvidia.com label namespace (master.config.extraLabelNs in " +
			"NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0)")
	}
}

// TestNVIDIAsNFDSectionSharesOneServiceAccount renders NVIDIA's own node-feature-discovery values: the
// master creates ServiceAccount node-feature-discovery, and the worker and gc run as it and are bound
// to their roles as it.
func TestNVIDIAsNFDSectionSharesOneServiceAccount(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "values", "nvidia-nfd-section.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, mustRender(t, nfdChart, splitValues(t, "nvidia", data).nfd, capabilities(t)))
	var sas []string
	for _, o := range objs {
		if o["kind"] == "ServiceAccount" {
			sas = append(sas, field[string](o, "metadata", "name"))
		}
	}
	if !slices.Equal(sas, []string{"node-feature-discovery"}) {
		t.Errorf("ServiceAccounts %v, want only node-feature-discovery", sas)
	}
	for _, o := range objs {
		switch o["kind"] {
		case "Deployment", "DaemonSet":
			if got := field[string](o, "spec", "template", "spec", "serviceAccountName"); got != "node-feature-discovery" {
				t.Errorf("%s %s runs as %q", o["kind"], field[string](o, "metadata", "name"), got)
			}
		case "RoleBinding", "ClusterRoleBinding":
			if got := field[string](o, "subjects", 0, "name"); got != "node-feature-discovery" {
				t.Errorf("%s %s binds %q", o["kind"], field[string](o, "metadata", "name"), got)
			}
		}
	}
}

func TestSchemaRejectsWrongValues(t *testing.T) {
	tests := []struct {
		name, chart, vals, wantErr string
	}{
		{"a string for a boolean switch", gpuChart, `driver: {enabled: "yes"}`, "enabled"},
		{"a misspelt top-level section", gpuChart, `devicePlugins: {enabled: false}`, "devicePlugins"},
		{"an unknown MIG strategy", gpuChart, `mig: {strategy: all}`, "strategy"},
		{"an env entry without a name", gpuChart, `toolkit: {env: [{value: x}]}`, "name"},
		{"a toleration operator Kubernetes does not know", gpuChart, `daemonsets: {tolerations: [{key: a, operator: Is}]}`, "operator"},
		{"a PCI label field NFD does not know", nfdChart, `worker: {config: {sources: {pci: {deviceLabelFields: [klass]}}}}`, "deviceLabelFields"},
		{"a feature gate that is not a boolean", nfdChart, `featureGates: {NodeFeatureGroupAPI: "on"}`, "featureGates"},
		{"a port out of range", nfdChart, `master: {port: 70000}`, "port"},
		{"a GKE node image the installer does not know", installerChart, `variant: rhel`, "variant"},
		{"a misspelt installer value", installerChart, `tolerration: []`, "tolerration"},
		{"an extra node selector that overrides the variant's", installerChart, `nodeSelector: {cloud.google.com/gke-os-distribution: ubuntu}`, "nodeSelector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := map[string]any{}
			if err := yaml.Unmarshal([]byte(tt.vals), &vals); err != nil {
				t.Fatal(err)
			}
			_, err := render(t, tt.chart, vals, capabilities(t))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("render error = %v, want a schema error about %s", err, tt.wantErr)
			}
		})
	}
}

// TestAcceptsNVIDIAKeysItDoesNotRender keeps profiles portable: keys of NVIDIA's charts that ours
// ignores must pass validation and render nothing (the SCC is OLM's on OpenShift).
func TestAcceptsNVIDIAKeysItDoesNotRender(t *testing.T) {
	tests := []struct{ name, chart, vals string }{
		{"gpu-operator", gpuChart, `
platform: {openshift: true}
nfd: {enabled: true, nodefeaturerules: false}
node-feature-discovery: {worker: {serviceAccount: {create: false}}}
operator: {upgradeCRD: false, cleanupCRD: true, use_ocp_driver_toolkit: false}
driver: {useOpenKernelModules: false, upgradePolicy: {drain: {enable: true}}}
cdi: {default: false}
draDriver: {repository: nvcr.io/nvidia, image: dra-driver-nvidia-gpu, version: v0.5.0}
gpuCluster: {deployCR: false}
kataManager: {enabled: false, config: {artifactsDir: /opt/nvidia-gpu-operator/artifacts/runtimeclasses}}
`},
		{"node-feature-discovery", nfdChart, `
topologyUpdater: {enable: false}
prometheus: {enable: false}
postDeleteCleanup: true
master: {instance: "", hostNetwork: false}
worker: {hostNetwork: false}
gc: {revisionHistoryLimit: 10}
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := map[string]any{}
			if err := yaml.Unmarshal([]byte(tt.vals), &vals); err != nil {
				t.Fatal(err)
			}
			manifests, err := render(t, tt.chart, vals, capabilities(t))
			if err != nil {
				t.Fatalf("render failed: %v", err)
			}
			defaults := mustRender(t, tt.chart, nil, capabilities(t))
			if got, want := kinds(objects(t, manifests)), kinds(objects(t, defaults)); !slices.Equal(got, want) {
				t.Errorf("rendered %v, want the default objects %v", got, want)
			}
		})
	}
}

// TestTemplatesBranchOnTheRelease loads the chart for each older release as gpuctl does
// (--operator-version) and checks what NVIDIA's chart of that release renders differently from
// v26.7.0's; charts/oracle_test.go holds every field to NVIDIA's chart where its sources are present.
func TestTemplatesBranchOnTheRelease(t *testing.T) {
	vals := map[string]any{
		"hostPaths":    map[string]any{"kubeletRootDir": "/var/lib/k0s/kubelet"},
		"toolkit":      map[string]any{"hostNetwork": true},
		"extraObjects": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "extra"}}},
	}
	tests := []struct {
		release string
		check   func(t *testing.T, spec, deploy map[string]any, objs []map[string]any)
	}{
		{"v26.3.3", func(t *testing.T, spec, deploy map[string]any, objs []map[string]any) {
			expect(t, spec, "", "hostPaths", "kubeletRootDir")
			expect(t, spec, true, "toolkit", "hostNetwork")
			expect(t, spec, "on", "ccManager", "defaultMode")
			expect(t, spec, false, "dcgmExporter", "serviceMonitor", "enabled")
			expect(t, spec, "", "dcgmExporter", "serviceMonitor", "scrapeTimeout")
			if slices.ContainsFunc(field[[]any](deploy, "spec", "template", "spec", "containers", 0, "env"), func(e any) bool {
				return field[string](e, "name") == "VALIDATOR_IMAGE"
			}) {
				t.Error("the operator gets VALIDATOR_IMAGE, which NVIDIA's chart sets from v26.7 only")
			}
			if !slices.Contains(kinds(objs), "ConfigMap/extra") {
				t.Error("extraObjects are not rendered")
			}
		}},
		{"v25.10.1", func(t *testing.T, spec, deploy map[string]any, objs []map[string]any) {
			expect(t, spec, false, "toolkit", "hostNetwork")
			expect(t, spec, false, "ccManager", "enabled")
			expect(t, spec, "off", "ccManager", "defaultMode")
			expect(t, spec, "CC_CAPABLE_DEVICE_IDS", "ccManager", "env", 0, "name")
			expect(t, spec, "cuda", "operator", "initContainer", "image")
			if _, ok := spec["kataSandboxDevicePlugin"]; ok {
				t.Error("kataSandboxDevicePlugin rendered; v25.10's ClusterPolicy has none")
			}
			if field[string](deploy, "spec", "template", "spec", "volumes", 0, "hostPath", "path") != "/etc/os-release" {
				t.Error("the operator does not get the host's /etc/os-release, which v25.10 reads")
			}
			if slices.Contains(kinds(objs), "ConfigMap/extra") {
				t.Error("extraObjects rendered; v25.10's chart has none")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.release, func(t *testing.T) {
			c, err := gpurelease.LoadChartRelease(FS, gpuChart, tt.release)
			if err != nil {
				t.Fatal(err)
			}
			top, err := util.ToRenderValues(c, vals, release[gpuChart], capabilities(t))
			if err != nil {
				t.Fatal(err)
			}
			out, err := engine.Render(c, top)
			if err != nil {
				t.Fatal(err)
			}
			objs := objects(t, out)
			tt.check(t, field[map[string]any](find(t, objs, "ClusterPolicy", "cluster-policy"), "spec"), find(t, objs, "Deployment", "gpu-operator"), objs)
		})
	}
}

// TestExtraObjectsAreRenderedThroughTpl: extraObjects from the values become objects of the release,
// rendered through tpl as NVIDIA's chart renders them (templates/extra-objects.yaml at v26.7.0), whether
// written as maps or as strings.
func TestExtraObjectsAreRenderedThroughTpl(t *testing.T) {
	vals := map[string]any{}
	if err := yaml.Unmarshal([]byte(`
extraObjects:
  - {apiVersion: v1, kind: ResourceQuota, metadata: {name: "{{ .Release.Name }}-quota", namespace: "{{ .Release.Namespace }}"}, spec: {hard: {pods: "100"}}}
  - |
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: notes}
    data: {driver: {{ .Values.driver.version | quote }}}
`), &vals); err != nil {
		t.Fatal(err)
	}
	objs := objects(t, mustRender(t, gpuChart, vals, capabilities(t)))
	quota := find(t, objs, "ResourceQuota", "gpu-operator-quota")
	if got := field[string](quota, "metadata", "namespace"); got != "gpu-operator" {
		t.Errorf("ResourceQuota namespace %q, want the release's", got)
	}
	if got := field[string](find(t, objs, "ConfigMap", "notes"), "data", "driver"); got != "595.91.07" {
		t.Errorf("ConfigMap notes data.driver = %q, want the driver version", got)
	}
}

func kinds(objs []map[string]any) []string {
	var out []string
	for _, o := range objs {
		out = append(out, fmt.Sprintf("%s/%s", o["kind"], field[string](o, "metadata", "name")))
	}
	return out
}

// TestRefusesValuesItCannotHonour: values that ask NVIDIA's chart for objects this chart does not
// render fail with a message, instead of installing something else than asked.
func TestRefusesValuesItCannotHonour(t *testing.T) {
	tests := []struct{ name, vals, wantErr string }{
		{"the DRA GPUCluster", `gpuCluster: {deployCR: true}`, "gpuCluster.deployCR"},
		{"NVIDIA's NodeFeatureRule", `nfd: {nodefeaturerules: true}`, "nfd.nodefeaturerules"},
		{"the NRI plugin without the toolkit", `cdi: {nriPluginEnabled: true}
toolkit: {enabled: false}`, "nriPluginEnabled"},
		{"a ConfigMap to create without a name", `devicePlugin: {config: {create: true, data: {a: b}}}`, "devicePlugin.config.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := map[string]any{}
			if err := yaml.Unmarshal([]byte(tt.vals), &vals); err != nil {
				t.Fatal(err)
			}
			_, err := render(t, gpuChart, vals, capabilities(t))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("render error = %v, want one mentioning %s", err, tt.wantErr)
			}
		})
	}
}

// TestHelmLintIsClean lints the embedded copy of each chart (what the binary ships), as `helm lint`
// would, and accepts no warning.
func TestHelmLintIsClean(t *testing.T) {
	kv, err := common.ParseKubeVersion("v1.33.0")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, FS); err != nil {
		t.Fatal(err)
	}
	for _, name := range append(Names(), Optional()...) {
		t.Run(name, func(t *testing.T) {
			res := lint.RunAll(filepath.Join(dir, name), nil, release[name].Namespace, lint.WithKubeVersion(kv))
			for _, m := range res.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("%v", m)
				}
			}
		})
	}
}

// TestGKEDriverInstallerRunsWhereGKEInstallsNoDriver checks the optional installer chart against
// NVIDIA's GKE guide (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html)
// and Google's installer manifests, for both node images.
func TestGKEDriverInstallerRunsWhereGKEInstallsNoDriver(t *testing.T) {
	if got := Optional(); !slices.Contains(got, installerChart) || slices.Contains(Names(), installerChart) {
		t.Fatalf("Optional() = %v, want [%s]", got, installerChart)
	}
	c := mustLoad(t, installerChart)
	if c.Schema == nil || !slices.ContainsFunc(c.Templates, func(f *common.File) bool { return f.Name == "templates/_helpers.tpl" }) {
		t.Fatal("values.schema.json or templates/_helpers.tpl is not embedded")
	}

	tests := []struct {
		variant, image string
		hostPaths      []string
		hostPID        bool
	}{
		{"cos", "cos-nvidia-installer:fixed",
			[]string{"/", "/dev", "/etc/nvidia", "/home/kubernetes/bin/nvidia", "/home/kubernetes/bin/nvidia/vulkan/icd.d", "/var/lib/cos-tools"}, true},
		{"ubuntu", "gke-nvidia-installer:fixed", []string{"/", "/boot", "/dev"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.variant+" nodes without a GKE driver get the preloaded "+tt.variant+" installer", func(t *testing.T) {
			objs := objects(t, mustRender(t, installerChart, map[string]any{"variant": tt.variant}, capabilities(t)))
			if len(objs) != 1 {
				t.Fatalf("rendered %v, want one DaemonSet", kinds(objs))
			}
			pod := field[map[string]any](find(t, objs, "DaemonSet", "gke-driver-installer"), "spec", "template", "spec")

			if got := field[string](pod, "nodeSelector", "cloud.google.com/gke-os-distribution"); got != tt.variant {
				t.Errorf("nodeSelector gke-os-distribution = %q, want %s", got, tt.variant)
			}
			terms := field[[]any](pod, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
			sawNoLabel := false
			for _, term := range terms {
				ops, vals := map[string]string{}, map[string][]any{}
				for _, e := range field[[]any](term, "matchExpressions") {
					ops[field[string](e, "key")] = field[string](e, "operator")
					vals[field[string](e, "key")] = field[[]any](e, "values")
				}
				if ops["cloud.google.com/gke-accelerator"] != "Exists" {
					t.Errorf("term %v does not require cloud.google.com/gke-accelerator", term)
				}
				switch op := ops["cloud.google.com/gke-gpu-driver-version"]; {
				case op == "DoesNotExist":
					sawNoLabel = true
				case op == "In" && slices.Equal(vals["cloud.google.com/gke-gpu-driver-version"], []any{"disabled"}):
				default:
					t.Errorf("term %v would run on nodes GKE installs a driver on", term)
				}
			}
			if !sawNoLabel {
				t.Errorf("no term matches nodes without cloud.google.com/gke-gpu-driver-version (" +
					"GoogleCloudPlatform/container-engine-accelerators nvidia-driver-installer/cos/daemonset-preloaded.yaml@master)")
			}

			if pod["priorityClassName"] != "system-node-critical" {
				t.Errorf("priorityClassName %v", pod["priorityClassName"])
			}
			tolerates := func(key string) bool {
				return slices.ContainsFunc(field[[]any](pod, "tolerations"), func(tol any) bool {
					return field[string](tol, "key") == key && field[string](tol, "operator") == "Exists" && field[string](tol, "effect") == "NoSchedule"
				})
			}
			if !tolerates("nvidia.com/gpu") || !tolerates("") {
				t.Errorf("tolerations %v, want nvidia.com/gpu and every NoSchedule taint", pod["tolerations"])
			}
			if got, _ := pod["hostPID"].(bool); got != tt.hostPID {
				t.Errorf("hostPID = %v, want %v", got, tt.hostPID)
			}

			installer := field[map[string]any](pod, "initContainers", 0)
			if installer["image"] != tt.image || installer["imagePullPolicy"] != "Never" || !field[bool](installer, "securityContext", "privileged") {
				t.Errorf("installer image %v (%v), privileged %v; want the preloaded %s, never pulled, privileged",
					installer["image"], installer["imagePullPolicy"], field[bool](installer, "securityContext", "privileged"), tt.image)
			}
			var paths []string
			for _, v := range field[[]any](pod, "volumes") {
				paths = append(paths, field[string](v, "hostPath", "path"))
			}
			slices.Sort(paths)
			if !slices.Equal(paths, tt.hostPaths) {
				t.Errorf("hostPath volumes %v, want %v", paths, tt.hostPaths)
			}
			if got := field[string](pod, "containers", 0, "image"); !strings.HasPrefix(got, "gke.gcr.io/pause:3.8@sha256:") {
				t.Errorf("main container image %q, want GKE's pause image", got)
			}
		})
	}

	t.Run("the COS installer writes where the gke profile tells the operator to look", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join("..", "profiles", "gke.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		gke := splitValues(t, "gke", data).gpu
		objs := objects(t, mustRender(t, installerChart, map[string]any{"variant": "cos"}, capabilities(t)))
		env := map[string]string{}
		for _, e := range field[[]any](find(t, objs, "DaemonSet", "gke-driver-installer"), "spec", "template", "spec", "initContainers", 0, "env") {
			env[field[string](e, "name")] = field[string](e, "value")
		}
		for _, path := range [][]any{{"hostPaths", "driverInstallDir"}, {"toolkit", "installDir"}} {
			if want := field[string](gke, path...); env["NVIDIA_INSTALL_DIR_HOST"] != want {
				t.Errorf("NVIDIA_INSTALL_DIR_HOST = %q, but the gke profile's %v is %q", env["NVIDIA_INSTALL_DIR_HOST"], path, want)
			}
		}
	})

	versionTests := []struct {
		name string
		vals string
		want func(installer map[string]any) bool
	}{
		{"a COS driver version becomes the installer's --version flag", `{variant: cos, cos: {driverVersion: latest}}`, func(c map[string]any) bool {
			return slices.Equal(field[[]any](c, "command"), []any{"/cos-gpu-installer", "install", "--version=latest"})
		}},
		{"without a COS driver version the image's own entrypoint runs", `{variant: cos}`, func(c map[string]any) bool {
			return c["command"] == nil
		}},
		{"an Ubuntu driver version becomes NVIDIA_DRIVER_VERSION", `{variant: ubuntu, ubuntu: {driverVersion: "580.65.06"}}`, func(c map[string]any) bool {
			return field[string](c, "env", 0, "name") == "NVIDIA_DRIVER_VERSION" && field[string](c, "env", 0, "value") == "580.65.06"
		}},
	}
	for _, tt := range versionTests {
		t.Run(tt.name, func(t *testing.T) {
			vals := map[string]any{}
			if err := yaml.Unmarshal([]byte(tt.vals), &vals); err != nil {
				t.Fatal(err)
			}
			objs := objects(t, mustRender(t, installerChart, vals, capabilities(t)))
			installer := field[map[string]any](find(t, objs, "DaemonSet", "gke-driver-installer"), "spec", "template", "spec", "initContainers", 0)
			if !tt.want(installer) {
				t.Errorf("installer container %v", installer)
			}
		})
	}

	t.Run("partition-gpus runs after the COS install unless turned off", func(t *testing.T) {
		for _, on := range []bool{true, false} {
			vals := map[string]any{"variant": "cos", "cos": map[string]any{"partitionGPUs": map[string]any{"enabled": on}}}
			objs := objects(t, mustRender(t, installerChart, vals, capabilities(t)))
			var names []string
			for _, c := range field[[]any](find(t, objs, "DaemonSet", "gke-driver-installer"), "spec", "template", "spec", "initContainers") {
				names = append(names, field[string](c, "name"))
			}
			want := []string{"nvidia-driver-installer"}
			if on {
				want = append(want, "partition-gpus")
			}
			if !slices.Equal(names, want) {
				t.Errorf("partitionGPUs.enabled=%v: init containers %v, want %v", on, names, want)
			}
		}
	})
}

// Our chart names a kernelDrivers entry's NVIDIADriver as gpuctl's plan does (plan.KernelDriverName),
// which names it in the plan's Drivers and finds it in status: the same for every kernel shape,
// awkward ones included (capitals, underscores and other characters, non-ASCII, names past 63
// characters, a cut that ends on "-" or ".").
func TestKernelDriverNamesAreThePlans(t *testing.T) {
	kernels := []string{
		"6.8.0-60-generic",
		"5.14.0-427.13.1.el9_4.x86_64",
		"6.1.0_DEBUG__1",
		"6.6.87+rpt-rpi-v8",
		"6.1.0-ÜBER~custom",
		"6.10.0-" + strings.Repeat("x", 48) + ".-tail",
		"6.10.0-" + strings.Repeat("y", 49) + "-.-tail",
		"6.10.0-" + strings.Repeat("z", 47) + "-.tail",
		strings.Repeat("9", 80),
	}
	var entries []any
	for _, k := range kernels {
		entries = append(entries, map[string]any{"kernel": k, "usePrecompiled": true, "version": "595"})
	}
	vals := map[string]any{"driver": map[string]any{"nvidiaDriverCRD": map[string]any{"enabled": true, "deployDefaultCR": false, "kernelDrivers": entries}}}
	objs := objects(t, mustRender(t, "gpu-operator", vals, capabilities(t)))
	byKernel := map[string]string{}
	for _, o := range objs {
		if o["kind"] == "NVIDIADriver" {
			byKernel[field[string](o, "spec", "nodeSelector", "feature.node.kubernetes.io/kernel-version.full")] = field[string](o, "metadata", "name")
		}
	}
	for _, k := range kernels {
		got, ok := byKernel[k]
		if !ok {
			t.Errorf("no NVIDIADriver selects kernel %q", k)
			continue
		}
		if want := plan.KernelDriverName(k); got != want {
			t.Errorf("kernel %q: the chart names its NVIDIADriver %q, the plan %q", k, got, want)
		}
		if len(got) > 63 || strings.HasSuffix(got, "-") || strings.HasSuffix(got, ".") {
			t.Errorf("kernel %q: NVIDIADriver name %q is no valid name", k, got)
		}
	}
}
