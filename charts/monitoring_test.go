package charts

import (
	"bufio"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// monitoringChart is the optional chart of `gpuctl install --monitoring` (Optional()).
const monitoringChart = "gpu-monitoring"

// monitoringCases are the golden renders of the monitoring chart.
var monitoringCases = []struct {
	name string
	vals map[string]any
}{
	{"defaults", map[string]any{}},
	{"honor-labels-grafana-namespace", map[string]any{
		"metricLabels":     map[string]any{"pod": "pod", "namespace": "namespace"},
		"additionalLabels": map[string]any{"release": "kube-prometheus-stack"},
		"dashboard":        map[string]any{"namespace": "monitoring", "folder": "GPUs"},
		"rules":            map[string]any{"temperatureCelsius": 80, "temperatureFor": "5m"},
	}},
	{"rules-only", map[string]any{"dashboard": map[string]any{"enabled": false}}},
}

var dcgmField = regexp.MustCompile(`\bDCGM_FI_[A-Z0-9_]+\b`)

// defaultCounters reads the DCGM exporter's default counters of the dcgm-exporter version the GPU
// Operator chart pins (dcgmExporter.version, without its image variant suffix such as -distroless).
func defaultCounters(t *testing.T) (string, map[string]bool) {
	t.Helper()
	raw, err := FS.ReadFile(gpuChart + "/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var vals struct {
		DCGMExporter struct {
			Version string `json:"version"`
		} `json:"dcgmExporter"`
	}
	if err := yaml.Unmarshal(raw, &vals); err != nil {
		t.Fatal(err)
	}
	tag := strings.TrimSuffix(vals.DCGMExporter.Version, "-distroless")
	path := filepath.Join("testdata", "dcgm-exporter", tag+".txt")
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the GPU Operator chart pins dcgm-exporter %s, and there is no list of its default counters: %v (add the uncommented field names of https://github.com/NVIDIA/dcgm-exporter/blob/%s/etc/default-counters.csv)", vals.DCGMExporter.Version, err, tag)
	}
	defer f.Close()
	fields := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields[line] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return tag, fields
}

// monitoringQueries renders the chart with vals and returns the dashboard (decoded) and every PromQL
// expression of the dashboard and the rules, by where it was found.
func monitoringQueries(t *testing.T, vals map[string]any) (dashboard map[string]any, rules map[string]string, panels map[string]string) {
	t.Helper()
	objs := objects(t, mustRender(t, monitoringChart, vals, capabilities(t)))
	cm := find(t, objs, "ConfigMap", "gpu-monitoring-dashboard")
	data := field[string](cm, "data", "gpuctl-gpus.json")
	if err := json.Unmarshal([]byte(data), &dashboard); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	panels = map[string]string{}
	for _, p := range field[[]any](dashboard, "panels") {
		for i, tgt := range field[[]any](p, "targets") {
			panels[field[string](p, "title")+"#"+string(rune('A'+i))] = field[string](tgt, "expr")
		}
	}
	for _, v := range field[[]any](dashboard, "templating", "list") {
		if q := field[string](v, "definition"); q != "" {
			panels["variable "+field[string](v, "name")] = q
		}
	}
	rules = map[string]string{}
	pr := find(t, objs, "PrometheusRule", "gpu-monitoring")
	for _, g := range field[[]any](pr, "spec", "groups") {
		for _, r := range field[[]any](g, "rules") {
			rules[field[string](r, "alert")] = field[string](r, "expr")
		}
	}
	return dashboard, rules, panels
}

// TestMonitoringQueriesOnlyDefaultCounters: every DCGM field the dashboard and the alerts query is one
// the DCGM exporter of the operator release exports without a custom metrics ConfigMap, so a default
// install fills every panel.
func TestMonitoringQueriesOnlyDefaultCounters(t *testing.T) {
	tag, counters := defaultCounters(t)
	_, rules, panels := monitoringQueries(t, map[string]any{})
	used := map[string]bool{}
	for where, expr := range mergeMaps(rules, panels) {
		if strings.TrimSpace(expr) == "" {
			t.Errorf("%s has no query", where)
		}
		for _, f := range dcgmField.FindAllString(expr, -1) {
			used[f] = true
			if !counters[f] {
				t.Errorf("%s queries %s, which dcgm-exporter %s does not export by default", where, f, tag)
			}
		}
	}
	// The metrics the issue asks the dashboard for must all be there.
	for _, f := range []string{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP",
		"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_XID_ERRORS"} {
		if !used[f] {
			t.Errorf("nothing queries %s", f)
		}
	}
}

func mergeMaps(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestMonitoringDashboardAndAlerts(t *testing.T) {
	if got := Optional(); !slices.Contains(got, monitoringChart) || slices.Contains(Names(), monitoringChart) {
		t.Fatalf("Optional() = %v, want it to hold %s", got, monitoringChart)
	}
	t.Run("the dashboard ConfigMap carries the Grafana sidecar's label", func(t *testing.T) {
		objs := objects(t, mustRender(t, monitoringChart, map[string]any{}, capabilities(t)))
		cm := find(t, objs, "ConfigMap", "gpu-monitoring-dashboard")
		if got := field[string](cm, "metadata", "labels", "grafana_dashboard"); got != "1" {
			t.Errorf("grafana_dashboard label = %q, want \"1\" (kube-prometheus-stack's sidecar default)", got)
		}
		if got := field[string](cm, "metadata", "namespace"); got != "gpu-operator" {
			t.Errorf("namespace %q, want the release's", got)
		}
	})
	t.Run("the alerts the issue names are there", func(t *testing.T) {
		_, rules, _ := monitoringQueries(t, map[string]any{})
		names := make([]string, 0, len(rules))
		for n := range rules {
			names = append(names, n)
		}
		sort.Strings(names)
		want := []string{"GPUFellOffTheBus", "GPUNodeNotValidated", "GPUTemperatureHigh", "GPUXIDError"}
		if !slices.Equal(names, want) {
			t.Errorf("alerts %v, want %v", names, want)
		}
		if got := rules["GPUFellOffTheBus"]; !strings.Contains(got, "DCGM_FI_DEV_XID_ERRORS == 79") {
			t.Errorf("GPUFellOffTheBus = %q, want XID 79", got)
		}
		if got := rules["GPUNodeNotValidated"]; !strings.Contains(got, `namespace="gpu-operator"`) || !strings.Contains(got, "kube_pod_status_ready") {
			t.Errorf("GPUNodeNotValidated = %q, want the validator pods' readiness in gpu-operator", got)
		}
	})
	tests := []struct {
		name      string
		vals      map[string]any
		podLabel  string
		namespace string
		tempAbove string
	}{
		{"the default labels are the ones Prometheus gives the exporter's pod labels without honorLabels", map[string]any{}, "exported_pod", "gpu-operator", "> 85"},
		{"honorLabels users name pod and namespace", map[string]any{"metricLabels": map[string]any{"pod": "pod", "namespace": "namespace"}}, "pod", "gpu-operator", "> 85"},
		{"another operator namespace reaches the validator queries", map[string]any{"operatorNamespace": "nvidia-gpu-operator", "rules": map[string]any{"temperatureCelsius": 90}}, "exported_pod", "nvidia-gpu-operator", "> 90"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dashboard, rules, panels := monitoringQueries(t, tt.vals)
			raw, _ := json.Marshal(dashboard)
			for _, token := range []string{"__POD__", "__NAMESPACE__", "__OPERATOR_NAMESPACE__"} {
				if strings.Contains(string(raw), token) || strings.Contains(strings.Join(slices.Collect(maps.Values(rules)), "\n"), token) {
					t.Errorf("placeholder %s left in the output", token)
				}
			}
			if got := panels["GPU utilisation by pod#A"]; !strings.Contains(got, "by (") || !strings.Contains(got, tt.podLabel) {
				t.Errorf("per-pod utilisation = %q, want it grouped by %s", got, tt.podLabel)
			}
			if got := panels["Validator state per node#A"]; !strings.Contains(got, `namespace="`+tt.namespace+`"`) {
				t.Errorf("validator panel = %q, want namespace %s", got, tt.namespace)
			}
			if got := rules["GPUTemperatureHigh"]; !strings.Contains(got, tt.tempAbove) {
				t.Errorf("GPUTemperatureHigh = %q, want %s", got, tt.tempAbove)
			}
		})
	}
	t.Run("a misspelt value is refused", func(t *testing.T) {
		if _, err := render(t, monitoringChart, map[string]any{"dashbaord": map[string]any{}}, capabilities(t)); err == nil || !strings.Contains(err.Error(), "dashbaord") {
			t.Errorf("render = %v, want a schema error naming dashbaord", err)
		}
	})
}
