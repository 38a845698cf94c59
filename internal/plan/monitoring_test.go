package plan

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/detect"
)

func withPrometheus(served bool) func(*detect.Result) {
	return func(r *detect.Result) {
		r.PrometheusOperator = &detect.Finding{Detected: served}
	}
}

func TestMonitoring(t *testing.T) {
	charts := maps.Clone(testCharts)
	charts[MonitoringRelease] = ChartInfo{Name: MonitoringRelease, Version: "0.1.0", AppVersion: "v26.7.0"}
	older := maps.Clone(charts)
	older[OperatorRelease] = ChartInfo{Name: "gpu-operator", Version: "26.3.3", AppVersion: "v26.3.3"}
	tests := []struct {
		name        string
		det         *detect.Result
		charts      map[string]ChartInfo
		opts        Options
		wantRelease bool
		wantValues  map[string]any // the --monitoring layer of the operator release; nil: no such layer
		wantWarning string
	}{
		{"where monitoring.coreos.com is served both ServiceMonitors are asked for and the dashboard release follows the operator",
			detection("kubeadm", withPrometheus(true)), charts, Options{Monitoring: true}, true,
			map[string]any{"dcgmExporter": map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
				"operator": map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}}}, ""},
		{"v26.3 has no operator.metrics: only the exporter's ServiceMonitor is asked for",
			detection("kubeadm", withPrometheus(true)), older, Options{Monitoring: true}, true,
			map[string]any{"dcgmExporter": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}}, ""},
		{"without the Prometheus Operator's API it warns and changes nothing",
			detection("kubeadm", withPrometheus(false)), charts, Options{Monitoring: true}, false, nil, "install kube-prometheus-stack first"},
		{"when discovery was refused it warns and changes nothing",
			detection("kubeadm"), charts, Options{Monitoring: true}, false, nil, "API discovery was refused"},
		{"off, nothing is added even where Prometheus runs",
			detection("kubeadm", withPrometheus(true)), charts, Options{}, false, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Build(Input{Detection: tt.det, Profile: fakeProfiles, Charts: tt.charts, Options: tt.opts})
			if err != nil {
				t.Fatal(err)
			}
			ids := stepIDs(p)
			i := slices.Index(ids, "release-"+MonitoringRelease)
			if got := i >= 0; got != tt.wantRelease {
				t.Fatalf("monitoring release step present = %v, want %v (steps %v)", got, tt.wantRelease, ids)
			}
			if tt.wantRelease {
				if op := slices.Index(ids, "release-"+OperatorRelease); i != op+1 {
					t.Errorf("steps %v: the monitoring release must come right after the operator's", ids)
				}
				if r := p.Step("release-" + MonitoringRelease).Release; r.Namespace != "gpu-operator" || r.Chart != MonitoringRelease {
					t.Errorf("release %+v, want chart %s in gpu-operator", r, MonitoringRelease)
				}
			}
			op := p.Step("release-" + OperatorRelease).Release
			var layer map[string]any
			for _, l := range op.Layers {
				if l.Source == MonitoringSource {
					layer = l.Values
				}
			}
			if !reflect.DeepEqual(layer, tt.wantValues) {
				t.Errorf("--monitoring layer %v, want %v", layer, tt.wantValues)
			}
			if tt.wantValues != nil && at(op.Values, "dcgmExporter", "serviceMonitor", "enabled") != true {
				t.Errorf("operator values %v do not enable the exporter's ServiceMonitor", op.Values)
			}
			warned := slices.ContainsFunc(p.Warnings, func(w string) bool { return tt.wantWarning != "" && strings.Contains(w, tt.wantWarning) })
			if tt.wantWarning != "" && !warned {
				t.Errorf("warnings %q, want one saying %q", p.Warnings, tt.wantWarning)
			}
			if tt.wantWarning == "" && slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.Contains(w, "--monitoring") }) {
				t.Errorf("unexpected warning in %q", p.Warnings)
			}
		})
	}
	t.Run("a user's -f turning the exporter's ServiceMonitor off wins over --monitoring", func(t *testing.T) {
		p, err := Build(Input{Detection: detection("kubeadm", withPrometheus(true)), Profile: fakeProfiles, Charts: charts, Options: Options{Monitoring: true,
			Files: []Layer{{Source: "mine.yaml", Values: map[string]any{"dcgmExporter": map[string]any{"serviceMonitor": map[string]any{"enabled": false}}}}}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := at(p.Step("release-"+OperatorRelease).Release.Values, "dcgmExporter", "serviceMonitor", "enabled"); got != false {
			t.Errorf("dcgmExporter.serviceMonitor.enabled = %v, want the file's false", got)
		}
	})
}
