package detect

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestNewestReleases(t *testing.T) {
	payload := func(s string) func() string { return func() string { return s } }
	uncompressed := base64.StdEncoding.EncodeToString([]byte(`{"chart":{"metadata":{"name":"gpu-operator","version":"v1.11.1"}}}`))
	records := []helmRecord{
		{namespace: "gpu-operator", labels: map[string]string{"name": "gpu-operator", "version": "10", "status": "deployed"}, storage: "Secret", payload: payload(uncompressed)},
		{namespace: "gpu-operator", labels: map[string]string{"name": "gpu-operator", "version": "9", "status": "superseded"}, storage: "Secret", payload: func() string {
			t.Error("an older revision's payload was decoded")
			return ""
		}},
		{namespace: "x", labels: map[string]string{"name": "no-version"}, storage: "Secret", payload: payload("")},
		{namespace: "x", labels: map[string]string{"version": "1"}, storage: "Secret", payload: payload("")},
	}
	releases, warnings := newestReleases(records)
	if len(releases) != 1 {
		t.Fatalf("releases = %+v, want only gpu-operator (records without name or version are skipped)", releases)
	}
	r := releases[0]
	// Revision 10 sorts before 9 as text; the revision is compared as a number.
	if r.Revision != 10 || r.Status != "deployed" || r.Chart != "gpu-operator" || r.ChartVersion != "v1.11.1" {
		t.Errorf("release = %+v, want revision 10 decoded from an uncompressed payload", r)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %v", warnings)
	}
}

func TestDecodeChartMetadata(t *testing.T) {
	tests := []struct {
		name, data, wantErr string
	}{
		{"an empty payload", "", "no \"release\" key"},
		{"not base64", "%%%", "decode base64"},
		{"not JSON", base64.StdEncoding.EncodeToString([]byte("nope")), "decode release"},
		{"a release without chart metadata", base64.StdEncoding.EncodeToString([]byte(`{"name":"x"}`)), "no chart metadata"},
	}
	for _, tc := range tests {
		t.Run(tc.name+" is an error", func(t *testing.T) {
			_, err := decodeChartMetadata(tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestReleaseIsGpuctlsByItsLabel: a release is gpuctl's only when its newest revision carries gpuctl's
// release label; the name proves nothing (NVIDIA's guide names its release gpu-operator too).
func TestReleaseIsGpuctlsByItsLabel(t *testing.T) {
	payload := func() string { return "" }
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{"gpuctl's label", map[string]string{ManagedReleaseLabel: "true"}, true},
		{"no label: helm install gpu-operator nvidia/gpu-operator", nil, false},
		{"the label with another value", map[string]string{ManagedReleaseLabel: "false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			labels := map[string]string{"name": "gpu-operator", "version": "2", "status": "deployed"}
			for k, v := range tc.labels {
				labels[k] = v
			}
			// An older revision with the label does not make a newer one without it gpuctl's.
			older := map[string]string{"name": "gpu-operator", "version": "1", "status": "superseded", ManagedReleaseLabel: "true"}
			rels, _ := newestReleases([]helmRecord{
				{namespace: "gpu-operator", labels: older, storage: "Secret", payload: payload},
				{namespace: "gpu-operator", labels: labels, storage: "Secret", payload: payload},
			})
			if len(rels) != 1 || rels[0].Gpuctl != tc.want {
				t.Errorf("releases %+v: want Gpuctl=%v", rels, tc.want)
			}
		})
	}
}
