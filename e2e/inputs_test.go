package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
)

// Every bad input is refused before the first write, through the real command line against a real
// API server: the documented exit code, one line that names the input, no stack trace, and a cluster
// whose objects (resourceVersions), nodes and CRDs are as they were, the lock's Lease and the install
// record in kube-system included.
func TestBadInputs(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1}, NoOperator: true})
	dir := t.TempDir()
	write := func(name string, content []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, content, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	huge := filepath.Join(dir, "huge.yaml")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(140 << 20); err != nil { // 140 MB, sparse
		t.Fatal(err)
	}
	f.Close()
	// 3.5 MB of random bytes (4.7 MB in base64) that no compression shrinks: the release cannot fit.
	noise := make([]byte, 3_500_000)
	rand.Read(noise)
	large := write("large.yaml", []byte("driver:\n  annotations:\n    blob: "+base64.StdEncoding.EncodeToString(noise)+"\n"))
	badYAML := write("bad.yaml", []byte("driver: [\n"))
	token := write("token.tok", []byte("tok"))
	cfg := func(name, content string) []string { return []string{"--config", write(name, []byte(content))} }
	nobody := []string{"--as", "nobody"}

	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string
	}{
		// Syntax: judged by the CLI before it reads the cluster.
		{"a timeout that is no duration", nil, []string{"install", "--timeout", "forever"}, cli.ExitUsage, `"forever"`},
		{"a timeout that is no duration, from GPUCTL_TIMEOUT", map[string]string{"GPUCTL_TIMEOUT": "forever"}, []string{"install"}, cli.ExitUsage, "GPUCTL_TIMEOUT=forever"},
		{"a timeout that is no duration, from the config file", nil, append(cfg("t.yaml", "timeout: forever\n"), "install"), cli.ExitUsage, "forever"},
		{"a negative timeout", nil, []string{"install", "--timeout", "-5m"}, cli.ExitUsage, "must be positive"},
		{"a zero timeout", nil, []string{"install", "--timeout", "0s"}, cli.ExitUsage, "must be positive"},
		{"a namespace that is no DNS-1123 label", nil, []string{"install", "-n", "Bad_NS"}, cli.ExitUsage, `"Bad_NS"`},
		{"a namespace that is no DNS-1123 label, in check --pre", nil, []string{"check", "--pre", "-n", "Bad_NS"}, cli.ExitUsage, `"Bad_NS"`},
		{"a namespace that is no DNS-1123 label, from GPUCTL_NAMESPACE", map[string]string{"GPUCTL_NAMESPACE": "Bad_NS"}, []string{"install"}, cli.ExitUsage, `"Bad_NS"`},
		{"a namespace that is no DNS-1123 label, from the config file", nil, append(cfg("n.yaml", "namespace: Bad_NS\n"), "install"), cli.ExitUsage, `"Bad_NS"`},
		{"--set with an empty key", nil, []string{"install", "--set", "=x"}, cli.ExitUsage, `--set "=x"`},
		{"--set with an empty key after a good one", nil, []string{"install", "--set", "driver.enabled=false,=x"}, cli.ExitUsage, `"=x"`},
		{"--set without a value", nil, []string{"install", "--set", "driver.enabled"}, cli.ExitUsage, "--set driver.enabled"},
		{"--set with an empty key, from GPUCTL_SET", map[string]string{"GPUCTL_SET": "=x"}, []string{"install"}, cli.ExitUsage, `"=x"`},
		{"--set with an empty key, from the config file", nil, append(cfg("s.yaml", "set: [\"=x\"]\n"), "install"), cli.ExitUsage, `"=x"`},
		{"--set with an empty key, in check --pre", nil, []string{"check", "--pre", "--set", "=x"}, cli.ExitUsage, `"=x"`},
		{"an unknown profile", nil, []string{"install", "--profile", "bogus"}, cli.ExitUsage, "--profile bogus"},
		{"an unknown profile, in check --pre", nil, []string{"check", "--pre", "--profile", "bogus"}, cli.ExitUsage, "--profile bogus"},
		{"an unknown profile, in template", nil, []string{"template", "--profile", "nosuch"}, cli.ExitUsage, "--profile nosuch"},
		{"an unknown profile, in profiles show", nil, []string{"profiles", "show", "bogus"}, cli.ExitUsage, "bogus"},
		{"a missing NGC key file where no licence is needed", nil, []string{"install", "--ngc-api-key-file", "/nope"}, cli.ExitUsage, "--ngc-api-key-file /nope"},
		{"a missing NGC key file, in check --pre", nil, []string{"check", "--pre", "--ngc-api-key-file", "/nope"}, cli.ExitUsage, "--ngc-api-key-file /nope"},
		{"a missing NLS token file", nil, []string{"install", "--nls-token-file", "/nope.tok"}, cli.ExitUsage, "--nls-token-file /nope.tok"},
		{"a missing gridd.conf, from GPUCTL_GRIDD_CONF_FILE", map[string]string{"GPUCTL_GRIDD_CONF_FILE": "/nope.conf"}, []string{"install"}, cli.ExitUsage, "--gridd-conf-file /nope.conf"},
		{"a missing values file", nil, []string{"install", "-f", "/nope.yaml"}, cli.ExitUsage, "-f/--values /nope.yaml"},
		{"a 140 MB values file", nil, []string{"install", "-f", huge}, cli.ExitUsage, "140.0 MiB"},
		{"an unknown check to skip", nil, []string{"install", "--skip-check", "bogus"}, cli.ExitUsage, `"bogus"`},
		{"an unknown output format", nil, []string{"install", "-o", "xml"}, cli.ExitUsage, `"xml"`},
		{"an unknown flag", nil, []string{"install", "--bogus"}, cli.ExitUsage, "--bogus"},
		// Judged with the cluster's facts or the rendered plan, still before the first write.
		{"a values file that does not parse", nil, []string{"install", "-f", badYAML}, cli.ExitUsage, badYAML},
		{"an unknown operator release", nil, []string{"install", "--operator-version", "v1.0.0"}, cli.ExitUsage, "v1.0.0"},
		{"an unknown operator release, in check --pre", nil, []string{"check", "--pre", "--operator-version", "v1.0.0"}, cli.ExitUsage, "v1.0.0"},
		{"values too large for a Helm release", nil, []string{"install", "-f", large}, cli.ExitUsage, "release gpu-operator would be stored in"},
		{"values too large for a Helm release, in check --pre", nil, []string{"check", "--pre", "-f", large}, cli.ExitUsage, "release gpu-operator would be stored in"},
		// The other verbs that write judge their inputs before they take the lock.
		{"a values file that does not parse, in upgrade", nil, []string{"upgrade", "-f", badYAML}, cli.ExitUsage, badYAML},
		{"an unknown operator release, in upgrade", nil, []string{"upgrade", "--operator-version", "v1.0.0"}, cli.ExitUsage, "v1.0.0"},
		{"a negative lock wait, in install", nil, []string{"install", "--wait-for-lock", "-1s"}, cli.ExitUsage, "--wait-for-lock -1s"},
		{"a negative lock wait, in taint", nil, []string{"taint", "--wait-for-lock", "-1s"}, cli.ExitUsage, "--wait-for-lock -1s"},
		{"a negative lock wait, in untaint", nil, []string{"untaint", "--wait-for-lock", "-1s"}, cli.ExitUsage, "--wait-for-lock -1s"},
		{"a negative lock wait, in verify", nil, []string{"verify", "--wait-for-lock", "-1s"}, cli.ExitUsage, "--wait-for-lock -1s"},
		{"a --nodes that is no label selector, in verify", nil, []string{"verify", "--nodes", "pool in (a"}, cli.ExitUsage, "--nodes"},
		{"an invalid pull secret name, in verify", nil, []string{"verify", "--image-pull-secret", "Bad_Name"}, cli.ExitUsage, `"Bad_Name"`},
		// Permissions are a failed preflight check, in install as in check --pre.
		{"a user without permissions", nil, append(nobody, "install"), cli.ExitPreflight, "preflight checks failed"},
		{"a user without permissions, in check --pre", nil, append(nobody, "check", "--pre"), cli.ExitPreflight, "preflight checks failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := writableState(t, c)
			start := time.Now()
			code, stdout, stderr := gpuctlEnv(t, c, tc.env, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			// The last line is gpuctl's verdict (progress lines come before it); usage errors print
			// nothing else.
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			verdict := ""
			for _, l := range lines {
				if strings.HasPrefix(l, "gpuctl: ") {
					verdict = l
					break
				}
			}
			if !strings.Contains(verdict, tc.want) {
				t.Errorf("gpuctl's one-line verdict %q does not name the input (%q)", verdict, tc.want)
			}
			if tc.code == cli.ExitUsage && strings.HasPrefix(strings.Join(tc.args, " "), "install --") && !strings.Contains(tc.want, "would be stored") && len(lines) != 1 {
				t.Errorf("%d lines on stderr, want one", len(lines))
			}
			if strings.Contains(stdout+stderr, "goroutine ") || strings.Contains(stdout+stderr, "panic") {
				t.Errorf("a stack trace in the output")
			}
			if _, err := c.Kube.CoreV1().Namespaces().Get(t.Context(), "gpu-operator", metav1.GetOptions{}); err == nil {
				t.Error("namespace gpu-operator was created")
			}
			assertUnchanged(t, before, writableState(t, c))
			t.Logf("%s", time.Since(start).Round(time.Millisecond))
		})
	}

	t.Run("flags that do not apply to the platform are plan warnings", func(t *testing.T) {
		code, stdout, stderr := gpuctl(t, c, "install", "--dry-run", "--channel", "stable", "--ngc-api-key-file", token)
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		for _, want := range []string{"--channel stable: not used", "--ngc-api-key-file: not used"} {
			if !strings.Contains(stdout+stderr, want) {
				t.Errorf("no warning %q", want)
			}
		}
	})
}

// A TKGS re-run without the licence inputs reuses the Secrets the first install made and says so,
// instead of failing preflight; check --pre takes the same licensing flags as install.
func TestTKGSRerunReusesLicensingSecrets(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "tkgs", GPUNodes: 1, CPUNodes: 1}})
	ctx := t.Context()
	env := nvaieInputs(t)
	type checkResult struct{ ID, Status, Message string }
	results := func(t *testing.T, stdout string) []checkResult {
		t.Helper()
		var rep struct {
			Results []checkResult `json:"results"`
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("check --pre -o json: %v", err)
		}
		return rep.Results
	}
	checks := func(t *testing.T, stdout string) {
		t.Helper()
		for _, r := range results(t, stdout) {
			// release-size: a plan with the NVAIE values fits in Helm's storage with room to spare.
			if (r.ID == "plan" || r.ID == "release-size") && r.Status != "pass" {
				t.Errorf("%s check %s: %s", r.ID, r.Status, r.Message)
			}
		}
	}
	// check --pre before the first install, for the subtests that read it.
	preCode, preStdout, _ := gpuctlEnv(t, c, env, "check", "--pre", "-o", "json")
	var estimate string
	for _, r := range results(t, preStdout) {
		if r.ID == "release-size" {
			t.Logf("release sizes: %s", r.Message)
			estimate = r.Message
		}
	}
	t.Run("check --pre takes the licensing inputs", func(t *testing.T) {
		if preCode == cli.ExitUsage {
			t.Fatalf("exit %d", preCode)
		}
		checks(t, preStdout)
	})
	if code, _, stderr := gpuctlEnv(t, c, env, "install"); code != 0 {
		t.Fatalf("first install exited %d:\n%s", code, stderr)
	}
	versions := func() map[string]string {
		out := map[string]string{}
		for _, name := range []string{"licensing-config", "ngc-secret"} {
			s, err := c.Kube.CoreV1().Secrets("gpu-operator").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			out[name] = s.ResourceVersion
		}
		return out
	}
	before := versions()
	t.Run("the release-size check measured what Helm stored", func(t *testing.T) {
		secs, err := c.Kube.CoreV1().Secrets("gpu-operator").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=gpu-operator"})
		if err != nil || len(secs.Items) != 1 {
			t.Fatalf("release Secrets: %v, %d", err, len(secs.Items))
		}
		stored := float64(len(secs.Items[0].Data["release"])) / (1 << 10)
		_, after, _ := strings.Cut(estimate, "gpu-operator ")
		var measured float64
		if _, err := fmt.Sscanf(after, "%f KiB", &measured); err != nil {
			t.Fatalf("no gpu-operator size in %q", estimate)
		}
		// The stored record differs only in timestamps, labels and annotations a real run adds.
		if measured < stored-2 || measured > stored+2 {
			t.Errorf("Helm stored %.1f KiB; the check measured %.0f KiB", stored, measured)
		}
	})

	t.Run("install without inputs plans to reuse them and says so", func(t *testing.T) {
		code, stdout, stderr := gpuctl(t, c, "install", "--dry-run")
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		if !strings.Contains(stdout+stderr, "reusing the existing Secrets licensing-config and ngc-secret") {
			t.Errorf("the plan does not say the Secrets are reused:\n%s%s", stdout, stderr)
		}
	})
	t.Run("check --pre without inputs passes the plan check", func(t *testing.T) {
		_, stdout, _ := gpuctl(t, c, "check", "--pre", "-o", "json")
		checks(t, stdout)
	})
	t.Run("install without inputs succeeds and keeps the Secrets", func(t *testing.T) {
		code, stdout, stderr := gpuctl(t, c, "install", "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, stderr)
		}
		if !strings.Contains(stderr, "reusing the existing Secrets") {
			t.Errorf("the run does not say the Secrets are reused")
		}
		var res struct{ Changed bool }
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatal(err)
		}
		if res.Changed {
			t.Error("the re-run changed something")
		}
		if after := versions(); !reflect.DeepEqual(before, after) {
			t.Errorf("Secrets changed: %v → %v", before, after)
		}
	})
}
