package ui

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/preflight"
)

func sampleReport() preflight.Report {
	return preflight.Report{Failed: true, Results: []preflight.Result{
		{ID: "api", Category: preflight.CategoryAPI, Description: "can read the cluster", Status: preflight.StatusPass, Message: "v1.37.2, kubeadm"},
		{ID: "autopilot", Category: preflight.CategoryAPI, Description: "not Autopilot", Status: preflight.StatusSkip, Message: "does not apply: not GKE"},
		{ID: "permissions", Category: preflight.CategoryPermissions, Description: "you may do it", Status: preflight.StatusFail,
			Message: "1 of the 9 permissions the install needs are missing:\nnodes: patch", Hint: "bind cluster-admin"},
		{ID: "kubernetes-version", Category: preflight.CategoryVersions, Description: "Kubernetes version is supported", Status: preflight.StatusWarn,
			Message: "Kubernetes 1.37 is newer", Hint: "https://docs.nvidia.com/platform-support"},
	}}
}

func TestRender(t *testing.T) {
	t.Run("plain output uses words, underlined categories, indented messages and hints, and a summary", func(t *testing.T) {
		var b bytes.Buffer
		if err := PrintPreflight(&b, sampleReport(), false); err != nil {
			t.Fatal(err)
		}
		want := `Kubernetes API
--------------
ok      can read the cluster (v1.37.2, kubeadm)
skipped not Autopilot (does not apply: not GKE)

Permissions
-----------
FAILED  you may do it
    1 of the 9 permissions the install needs are missing:
    nodes: patch
    hint: bind cluster-admin

Versions
--------
warning Kubernetes version is supported
    Kubernetes 1.37 is newer
    see: https://docs.nvidia.com/platform-support

Status check results are FAILED (1 warning)
To go ahead anyway, skip what failed with --skip-check permissions (only if you know why it fails).
`
		if b.String() != want {
			t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
		}
		if strings.Contains(b.String(), "\x1b[") {
			t.Error("plain output has ANSI escapes")
		}
	})

	t.Run("colour output uses linkerd's symbols in colour", func(t *testing.T) {
		var b bytes.Buffer
		if err := PrintPreflight(&b, sampleReport(), true); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, want := range []string{
			ansiGreen + "√" + ansiReset + " can read the cluster (v1.37.2, kubeadm)\n",
			ansiDim + "–" + ansiReset + " not Autopilot",
			ansiRed + "×" + ansiReset + " you may do it\n    1 of the 9",
			ansiYellow + "‼" + ansiReset + " Kubernetes version is supported\n",
			"Status check results are " + ansiRed + "×" + ansiReset + " (1 warning)\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("a report without failures ends with the pass symbol and no skip advice", func(t *testing.T) {
		var b bytes.Buffer
		rep := preflight.Report{Results: []preflight.Result{{ID: "api", Category: preflight.CategoryAPI, Description: "can read the cluster", Status: preflight.StatusPass}}}
		if err := PrintPreflight(&b, rep, true); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(b.String(), "Status check results are "+ansiGreen+"√"+ansiReset+"\n") || strings.Contains(b.String(), "--skip-check") {
			t.Errorf("got:\n%s", b.String())
		}
	})

	t.Run("no skip is suggested when there is no plan to go ahead with", func(t *testing.T) {
		var b bytes.Buffer
		rep := preflight.Report{Failed: true, Results: []preflight.Result{
			{ID: "plan", Category: preflight.CategoryPlan, Description: "gpuctl can plan the install", Status: preflight.StatusFail, Message: "a GPU operator is already installed", Hint: "h"},
			{ID: "existing-operator", Category: preflight.CategoryExisting, Description: "no other GPU operator is installed", Status: preflight.StatusFail, Message: "m", Hint: "h"},
		}}
		if err := PrintPreflight(&b, rep, false); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(b.String(), "--skip-check") || !strings.Contains(b.String(), "Status check results are FAILED") {
			t.Errorf("got:\n%s", b.String())
		}
	})

	t.Run("JSON has the results with their IDs and statuses and the overall verdict", func(t *testing.T) {
		b, err := json.Marshal(sampleReport())
		if err != nil {
			t.Fatal(err)
		}
		var back struct {
			Results []map[string]any `json:"results"`
			Failed  bool             `json:"failed"`
		}
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !back.Failed || len(back.Results) != 4 || back.Results[2]["id"] != "permissions" || back.Results[2]["status"] != "fail" ||
			back.Results[2]["hint"] != "bind cluster-admin" || back.Results[0]["category"] != preflight.CategoryAPI {
			t.Errorf("%s", b)
		}
	})
}
