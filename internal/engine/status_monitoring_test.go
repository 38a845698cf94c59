package engine

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestMonitoringCheck(t *testing.T) {
	dcgm := &unstructured.Unstructured{}
	dcgm.SetName(dcgmServiceMonitor)
	dcgm.SetLabels(map[string]string{"app": "nvidia-dcgm-exporter", "release": "kps"})
	both := []string{operatorServiceMonitor, dcgmServiceMonitor}
	release := &metav1.LabelSelector{MatchLabels: map[string]string{"release": "kps"}}
	other := &metav1.LabelSelector{MatchLabels: map[string]string{"release": "other"}}
	all := &metav1.LabelSelector{}
	tests := []struct {
		name        string
		on          bool
		monitors    []string
		dashboard   bool
		proms       []prometheusRef
		promsRead   bool
		wantState   CheckState
		wantScraped string
		wantMessage string
	}{
		{"off says so and how to turn it on", false, nil, false, nil, true, CheckOK, ScrapedUnknown, "off"},
		{"a Prometheus selecting the release label in every namespace scrapes it", true, both, true,
			[]prometheusRef{{name: "monitoring/kps", namespace: "monitoring", monitorSelector: release, namespaceSelector: all}}, true,
			CheckOK, ScrapedYes, "scraped by Prometheus monitoring/kps"},
		{"a Prometheus whose null namespace selector means only its own namespace does not", true, both, true,
			[]prometheusRef{{name: "monitoring/kps", namespace: "monitoring", monitorSelector: release}}, true,
			CheckWarning, ScrapedNo, "no Prometheus selects"},
		{"a Prometheus in the operator namespace with a null namespace selector does", true, both, true,
			[]prometheusRef{{name: "gpu-operator/p", namespace: "gpu-operator", monitorSelector: all}}, true,
			CheckOK, ScrapedYes, "gpu-operator/p"},
		{"a null ServiceMonitor selector selects nothing", true, both, true,
			[]prometheusRef{{name: "monitoring/kps", namespace: "monitoring", namespaceSelector: all}}, true,
			CheckWarning, ScrapedNo, "no Prometheus selects"},
		{"a selector for other labels does not select it", true, both, true,
			[]prometheusRef{{name: "monitoring/kps", namespace: "monitoring", monitorSelector: other, namespaceSelector: all}}, true,
			CheckWarning, ScrapedNo, "no Prometheus selects"},
		{"no Prometheus object: unknown, not a warning", true, both, true, nil, true, CheckOK, ScrapedUnknown, "unknown"},
		{"Prometheus objects that cannot be read: unknown", true, both, true, nil, false, CheckOK, ScrapedUnknown, "unknown"},
		{"a missing ServiceMonitor is a warning naming it", true, []string{dcgmServiceMonitor}, true, nil, true, CheckWarning, ScrapedUnknown, "ServiceMonitor gpu-operator not found"},
		{"a missing dashboard release is a warning", true, both, false, nil, true, CheckWarning, ScrapedUnknown, "gpu-monitoring release"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &MonitoringStatus{On: tt.on, Scraped: ScrapedUnknown}
			if tt.on {
				m.ServiceMonitors, m.Dashboard = slices.Sorted(slices.Values(tt.monitors)), tt.dashboard
				var sm *unstructured.Unstructured
				if slices.Contains(tt.monitors, dcgmServiceMonitor) {
					sm = dcgm
				}
				evaluateMonitoring(m, sm, "gpu-operator", map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}, tt.proms, tt.promsRead)
			}
			c := monitoringCheck(m, "gpu-operator")
			if c.Name != "monitoring" || c.State != tt.wantState || m.Scraped != tt.wantScraped || !strings.Contains(c.Message, tt.wantMessage) {
				t.Errorf("check %+v, scraped %s; want state %s, scraped %s, message with %q", c, m.Scraped, tt.wantState, tt.wantScraped, tt.wantMessage)
			}
		})
	}
}

func TestMonitoringProblemsKeepStatusHealthy(t *testing.T) {
	res := evaluateStatus(statusInputs{namespace: "gpu-operator", monitoring: &MonitoringStatus{On: true, Problem: "ServiceMonitor gpu-operator not found in gpu-operator"}})
	var got *StatusCheck
	for i := range res.Checks {
		if res.Checks[i].Name == "monitoring" {
			got = &res.Checks[i]
		}
	}
	if got == nil || got.State != CheckWarning {
		t.Fatalf("monitoring check %+v, want a warning", got)
	}
	if res.Monitoring == nil || !res.Monitoring.On {
		t.Errorf("result's monitoring %+v, want on", res.Monitoring)
	}
}
