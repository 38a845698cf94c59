package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/preflight"
)

// badInput is a mistake gpuctl must refuse before it reads the cluster: exit 2 and one line that
// names the input.
type badInput struct {
	name string
	env  map[string]string
	args []string
	want string
}

func TestBadInputsAreUsageErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	huge := filepath.Join(dir, "huge.yaml")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	// 140 MB, sparse: the size is what is judged, before anything reads it.
	if err := f.Truncate(140 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cfg := func(name, content string) []string { return []string{"--config", write(name, content)} }
	noCluster := []string{"--kubeconfig", filepath.Join(dir, "no-kubeconfig")}
	// A cluster nothing answers for: what the engine judges is judged before it asks the cluster.
	unreachable := []string{"--kubeconfig", write("unreachable", `apiVersion: v1
kind: Config
clusters: [{name: c1, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u1, user: {}}]
contexts: [{name: c1, context: {cluster: c1, user: u1}}]
current-context: c1
`)}

	cases := []badInput{
		{"a timeout that is no duration", nil, []string{"install", "--timeout", "forever"}, `"forever"`},
		{"a timeout that is no duration, from GPUCTL_TIMEOUT", map[string]string{"GPUCTL_TIMEOUT": "forever"}, []string{"install"}, "GPUCTL_TIMEOUT=forever"},
		{"a timeout that is no duration, from the config file", nil, append(cfg("t.yaml", "timeout: forever\n"), "install"), "forever"},
		{"a negative timeout", nil, []string{"install", "--timeout", "-5m"}, "--timeout -5m0s: must be positive"},
		{"a zero timeout", nil, []string{"install", "--timeout", "0"}, "must be positive"},
		{"a negative timeout from GPUCTL_TIMEOUT", map[string]string{"GPUCTL_TIMEOUT": "-1s"}, []string{"install"}, "must be positive"},
		{"a namespace that is no DNS-1123 label", nil, []string{"install", "-n", "Bad_NS"}, `"Bad_NS"`},
		{"a namespace that is no DNS-1123 label, for check --pre", nil, []string{"check", "--pre", "-n", "Bad_NS"}, `"Bad_NS"`},
		{"a namespace that is no DNS-1123 label, from GPUCTL_NAMESPACE", map[string]string{"GPUCTL_NAMESPACE": "Bad_NS"}, []string{"install"}, `"Bad_NS"`},
		{"a namespace that is no DNS-1123 label, from the config file", nil, append(cfg("n.yaml", "namespace: Bad_NS\n"), "install"), `"Bad_NS"`},
		{"a namespace too long for a label", nil, []string{"install", "-n", strings.Repeat("a", 64)}, "namespace"},
		{"--set with an empty key", nil, []string{"install", "--set", "=x"}, `--set "=x"`},
		{"--set with an empty key after a good one", nil, []string{"install", "--set", "a=1,=x"}, `"=x"`},
		{"--set with an empty path segment", nil, []string{"install", "--set", "driver..enabled=false"}, "--set"},
		{"--set with a leading dot", nil, []string{"install", "--set", ".driver=1"}, "--set"},
		{"--set without a value", nil, []string{"install", "--set", "driver.enabled"}, "--set driver.enabled"},
		{"--set with an unclosed index", nil, []string{"install", "--set", "a[0=1"}, "--set"},
		{"--set that sets nothing", nil, []string{"install", "--set", ""}, "--set"},
		{"--set with an empty key, from GPUCTL_SET", map[string]string{"GPUCTL_SET": "=x"}, []string{"install"}, `"=x"`},
		{"--set with an empty key, from the config file", nil, append(cfg("s.yaml", "set: [\"=x\"]\n"), "install"), `"=x"`},
		{"--set with an empty key in check --pre", nil, []string{"check", "--pre", "--set", "=x"}, `"=x"`},
		{"--set with an empty key in template", nil, []string{"template", "--profile", "gke", "--set", "=x"}, `"=x"`},
		{"an unknown profile in install", nil, []string{"install", "--profile", "bogus"}, "--profile bogus"},
		{"an unknown profile in check --pre", nil, []string{"check", "--pre", "--profile", "bogus"}, "--profile bogus"},
		{"an unknown profile in template", nil, []string{"template", "--profile", "nosuch"}, "--profile nosuch"},
		{"an unknown profile in profiles show", nil, []string{"profiles", "show", "bogus"}, "bogus"},
		{"an unknown profile from GPUCTL_PROFILE", map[string]string{"GPUCTL_PROFILE": "bogus"}, []string{"install"}, "--profile bogus"},
		{"a missing NGC key file", nil, []string{"install", "--ngc-api-key-file", "/nope"}, "--ngc-api-key-file /nope"},
		{"a missing NGC key file in check --pre", nil, []string{"check", "--pre", "--ngc-api-key-file", "/nope"}, "--ngc-api-key-file /nope"},
		{"a missing NLS token file", nil, []string{"install", "--nls-token-file", "/nope.tok"}, "--nls-token-file /nope.tok"},
		{"a missing gridd.conf", nil, []string{"install", "--gridd-conf-file", "/nope.conf"}, "--gridd-conf-file /nope.conf"},
		{"a missing gridd.conf from GPUCTL_GRIDD_CONF_FILE", map[string]string{"GPUCTL_GRIDD_CONF_FILE": "/nope.conf"}, []string{"install"}, "--gridd-conf-file /nope.conf"},
		{"a directory as NLS token file", nil, []string{"install", "--nls-token-file", dir}, "is a directory"},
		{"a missing values file", nil, []string{"install", "-f", "/nope.yaml"}, "-f/--values /nope.yaml"},
		{"a missing values file in template", nil, []string{"template", "--profile", "gke", "-f", "/nope.yaml"}, "-f/--values /nope.yaml"},
		{"a 140 MB values file", nil, []string{"install", "-f", huge}, "140.0 MiB"},
		{"a directory as values file", nil, []string{"install", "-f", dir}, "is a directory"},
		{"an unknown check to skip", nil, []string{"install", "--skip-check", "bogus"}, `"bogus"`},
		{"an unknown output format", nil, []string{"install", "-o", "xml"}, `"xml"`},
		{"an unknown flag", nil, []string{"install", "--bogus"}, "--bogus"},
		{"a boolean flag with a non-boolean value", nil, []string{"install", "--dry-run=maybe"}, "maybe"},
		{"a scalar setting given a list in the config file", nil, append(cfg("l.yaml", "profile: [gke, rke2]\n"), "install"), "profile takes one value"},
		// Judged by the engine before it contacts the cluster or takes the lock.
		{"a values file that does not parse", nil, append(unreachable, "install", "-f", write("bad.yaml", "driver: [\n")), "bad.yaml"},
		{"an unknown operator release", nil, append(unreachable, "install", "--operator-version", "v1.0.0"), "v1.0.0"},
		{"a values file that does not parse, in upgrade", nil, append(unreachable, "upgrade", "-f", write("bad2.yaml", "driver: [\n")), "bad2.yaml"},
		{"an unknown operator release, in upgrade", nil, append(unreachable, "upgrade", "--operator-version", "v1.0.0"), "v1.0.0"},
		{"MPS with one replica", nil, append(unreachable, "install", "--sharing", "mps=1"), "--sharing mps=1: mps needs at least 2 replicas"},
		{"MPS under the mixed MIG strategy, which NVIDIA's device plugin refuses", nil, append(unreachable, "install", "--mig", "mixed", "--sharing", "mps=2"),
			`"using --mig-strategy=mixed is not supported with MPS"`},
		{"an unknown sharing mode, in upgrade", nil, append(unreachable, "upgrade", "--sharing", "gpu-pool=mig=2"), `unknown mode "mig"`},
		{"two MIG strategies", nil, append(unreachable, "install", "--mig", "single", "--mig", "mixed"), "--mig mixed: the strategy is single already"},
		{"all-balanced under single, in upgrade", nil, append(unreachable, "upgrade", "--mig", "gpu-pool=all-balanced"), "add --mig mixed"},
		{"MIG from the config file, checked as the flag", nil, append(append(unreachable, cfg("mig.yaml", "version: 1\nmig: [none, mixed]\n")...), "install"), "--mig none"},
		{"sharing from the config file, checked as the flag", nil, append(append(unreachable, cfg("sharing.yaml", "version: 1\nsharing: [time-slicing=0]\n")...), "install"), "time-slicing needs at least 2 replicas"},
		// Every verb that takes the lock judges how long to wait for it.
		{"a negative --wait-for-lock", nil, []string{"install", "--wait-for-lock", "-1s"}, "--wait-for-lock -1s"},
		{"a negative --wait-for-lock, in upgrade", nil, []string{"upgrade", "--wait-for-lock", "-1s"}, "--wait-for-lock -1s"},
		{"a negative --wait-for-lock, in the wizard", nil, []string{"wizard", "--wait-for-lock", "-1s"}, "--wait-for-lock -1s"},
		{"a negative --wait-for-lock, in uninstall", nil, []string{"uninstall", "--wait-for-lock", "-1s"}, "--wait-for-lock -1s"},
		{"a negative --wait-for-lock, in taint", nil, []string{"taint", "--wait-for-lock", "-1s"}, "--wait-for-lock -1s"},
		{"a negative --wait-for-lock, in untaint", nil, []string{"untaint", "--wait-for-lock", "-1s"}, "--wait-for-lock -1s"},
		{"a negative --wait-for-lock, in verify", nil, []string{"verify", "--wait-for-lock", "-1s"}, "--wait-for-lock -1s"},
		{"an invalid --image-pull-secret, in verify", nil, []string{"verify", "--image-pull-secret", "Bad_Name"}, `"Bad_Name"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, tc.env, append(append([]string{}, noCluster...), tc.args...)...)
			assertUsageError(t, code, out, errOut, tc.want)
		})
	}
}

// assertUsageError asserts exit 2 and one line on stderr that names the input.
func assertUsageError(t *testing.T, code int, out, errOut, want string) {
	t.Helper()
	if code != ExitUsage {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, ExitUsage, errOut)
	}
	if lines := strings.Split(strings.TrimSpace(errOut), "\n"); len(lines) != 1 {
		t.Errorf("%d lines on stderr, want one:\n%s", len(lines), errOut)
	}
	if !strings.Contains(errOut, want) {
		t.Errorf("stderr does not name the input (%q):\n%s", want, errOut)
	}
	if strings.Contains(out+errOut, "goroutine") {
		t.Errorf("a stack trace:\n%s", errOut)
	}
}

func TestConfigFileListsStayLists(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("profile: kubeadm\nkube-version: \"1.33\"\nset:\n  - driver.version=999.1\n  - toolkit.version=888.2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, nil, "template", "--config", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"999.1", "888.2"} {
		if !strings.Contains(out, want) {
			t.Errorf("the config file's set item %q did not reach the render", want)
		}
	}
	if strings.Contains(out, "999.1,toolkit") {
		t.Error("the config file's list was joined into one --set value")
	}
	// GPUCTL_CONFIG names the file as --config does.
	code, out, errOut = run(t, map[string]string{"GPUCTL_CONFIG": cfg}, "template")
	if code != 0 || !strings.Contains(out, "888.2") {
		t.Errorf("GPUCTL_CONFIG: exit %d: %s", code, errOut)
	}
}

func TestValidateSet(t *testing.T) {
	for _, tc := range []struct {
		expr string
		ok   bool
	}{
		{"driver.enabled=false", true},
		{"a=1,b=2", true},
		{`a=x\,y`, true},
		{"a={x,y}", true},
		{"a[0]=1", true},
		{"a=", true},
		{"=x", false},
		{"a=1,=x", false},
		{".a=1", false},
		{"a.=1", false},
		{"a", false},
		{"", false},
		{",", false},
	} {
		err := validateSet([]string{tc.expr})
		if (err == nil) != tc.ok {
			t.Errorf("validateSet(%q) = %v, want ok=%v", tc.expr, err, tc.ok)
		}
	}
}

func TestSplitSet(t *testing.T) {
	got := splitSet(`a=1,b={x,y},c=d\,e`)
	want := []string{"a=1", "b={x,y}", `c=d\,e`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("splitSet = %q, want %q", got, want)
	}
}

func TestDetectionFailed(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("no"))
	for _, tc := range []struct {
		name      string
		err       error
		preflight bool
	}{
		{"a forbidden read is a failed preflight", &detect.Error{Err: fmt.Errorf("list nodes: %w", forbidden)}, true},
		{"a detection that failed otherwise is a failed preflight", &detect.Error{Err: errors.New("list nodes: connection refused")}, true},
		{"an interrupt stays an interrupt", &detect.Error{Err: context.Canceled}, false},
		{"another error keeps its meaning", errors.New("another gpuctl run holds the lock"), false},
		{"an error that merely reads like detection's is not one", errors.New("detect: something"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := errors.Is(detectionFailed(tc.err), preflight.ErrFailed); got != tc.preflight {
				t.Errorf("preflight %v, want %v", got, tc.preflight)
			}
		})
	}
}

func TestConfigView(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("version: 1\ntimeout: 45m\nprofile: gke\nmonitoring: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, map[string]string{"GPUCTL_NO_TAINT": "true"}, "--config", cfg, "--progress", "plain", "config", "view", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got Settings
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"timeout":    {"45m0s", "config file " + cfg},
		"profile":    {"gke", "config file " + cfg},
		"monitoring": {"true", "config file " + cfg},
		"no-taint":   {"true", "GPUCTL_NO_TAINT"},
		"progress":   {"plain", "flag"},
		"dry-run":    {"false", "default"},
	}
	for _, s := range got.Settings {
		if w, ok := want[s.Name]; ok {
			if s.Value != w[0] || s.Source != w[1] {
				t.Errorf("%s = %q from %q, want %q from %q", s.Name, s.Value, s.Source, w[0], w[1])
			}
			delete(want, s.Name)
		}
		if s.Name == "certificate-authority" {
			t.Error("config view lists every connection flag; gpuctl options has them")
		}
	}
	if len(want) > 0 {
		t.Errorf("config view lacks %v", want)
	}
	if got.Command != "gpuctl install" || got.ConfigFile != cfg {
		t.Errorf("command %q, file %q", got.Command, got.ConfigFile)
	}
	validateDocument(t, []byte(out))

	t.Run("an unknown key is a usage error naming it", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(bad, []byte("timout: 45m\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := run(t, nil, "--config", bad, "profiles", "list")
		if code != ExitUsage || !strings.Contains(errOut, "unknown key timout") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("exit %d: %q", code, errOut)
		}
	})
	t.Run("config view of no such command", func(t *testing.T) {
		if code, _, _ := run(t, nil, "config", "view", "nosuch"); code != ExitUsage {
			t.Errorf("exit %d", code)
		}
	})
}
