package detect

import "testing"

func TestPrometheusOperatorFromDiscovery(t *testing.T) {
	tests := []struct {
		name   string
		groups []string
		want   *bool
	}{
		{"a cluster serving monitoring.coreos.com has the Prometheus Operator's API", []string{"apps", "monitoring.coreos.com"}, ptr(true)},
		{"a cluster without it does not", []string{"apps", "batch"}, ptr(false)},
		{"refused discovery leaves it unknown", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Analyze(&Snapshot{APIGroups: tt.groups}).PrometheusOperator
			switch {
			case tt.want == nil && got != nil:
				t.Errorf("PrometheusOperator = %+v, want unknown (nil)", got)
			case tt.want != nil && got == nil:
				t.Errorf("PrometheusOperator unknown, want detected=%v", *tt.want)
			case tt.want != nil && got.Detected != *tt.want:
				t.Errorf("PrometheusOperator.Detected = %v, want %v", got.Detected, *tt.want)
			case tt.want != nil && *tt.want && (len(got.Evidence) != 1 || got.Evidence[0].Value != MonitoringGroup):
				t.Errorf("evidence %+v, want the api group", got.Evidence)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
