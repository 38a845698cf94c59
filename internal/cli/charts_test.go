package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/render"
)

// TestChartsPushRefusals: a registry path charts push cannot push under is a usage mistake (exit 2,
// one line), refused before anything is read or pushed.
func TestChartsPushRefusals(t *testing.T) {
	for _, tc := range []struct{ name, url, says string }{
		{"not an oci:// URL", "https://charts.example.com/gpuctl", "want an oci://HOST/PATH"},
		{"a tag in the path", "oci://registry.example.com/gpuctl:v1", "a tag is not a path"},
		{"a digest in the path", "oci://registry.example.com/gpuctl@sha256:0123", "a digest is not a path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, nil, "charts", "push", tc.url)
			if code != ExitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.says) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d and one line saying %q", code, stdout, stderr, ExitUsage, tc.says)
			}
		})
	}
}

// TestChartsPushDryRun: --dry-run -o json is the plan: every chart with its reference under the path and
// the digest charts save gives it; nothing is pushed (the registry host does not exist).
func TestChartsPushDryRun(t *testing.T) {
	code, stdout, stderr := run(t, nil, "charts", "push", "oci://registry.invalid/gpuctl", "--dry-run", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Items []render.PushedChart `json:"items"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	saved, err := render.SaveRepository(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Items) != len(saved) {
		t.Fatalf("the plan has %d charts, charts save writes %d", len(doc.Items), len(saved))
	}
	for i, c := range doc.Items {
		if c.Reference != "registry.invalid/gpuctl/"+c.Name+":"+c.Version || c.Digest != "sha256:"+saved[i].Digest || c.Manifest != "" {
			t.Errorf("%+v; charts save wrote %+v", c, saved[i])
		}
	}
}
