package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/ui"
)

// writeFleetKubeconfig writes a kubeconfig with a context per name, each pointing at its server.
func writeFleetKubeconfig(t *testing.T, servers map[string]string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\nclusters:\n")
	for name, server := range servers {
		fmt.Fprintf(&b, "- name: %s\n  cluster: {server: %q, insecure-skip-tls-verify: true}\n", name, server)
	}
	b.WriteString("users:\n- name: test\n  user: {token: test-token}\ncontexts:\n")
	for name := range servers {
		fmt.Fprintf(&b, "- name: %s\n  context: {cluster: %s, user: test}\n", name, name)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFleetUsageMistakes(t *testing.T) {
	kubeconfig := writeFleetKubeconfig(t, map[string]string{"east": refusingServer(t), "west": refusingServer(t)})
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"status", "verify"} {
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"--context with --contexts is refused", []string{"--context", "east", "--contexts", "east,west"}, "--context names one cluster"},
			{"--context with --all-contexts is refused", []string{"--context", "east", "--all-contexts"}, "--context names one cluster"},
			{"--contexts with --all-contexts is refused", []string{"--contexts", "east", "--all-contexts"}, "--contexts and --all-contexts"},
			{"an unknown context is refused, naming it and the known ones", []string{"--contexts", "east,north"}, `no context "north" in the kubeconfig (it has east, west)`},
			{"a context named twice is refused", []string{"--contexts", "east,east"}, "--contexts names east twice"},
			{"--max-parallel 0 is refused", []string{"--contexts", "east", "--max-parallel", "0"}, "--max-parallel 0"},
		} {
			t.Run(verb+": "+tc.name, func(t *testing.T) {
				code, out, errOut := run(t, nil, append([]string{"--kubeconfig", kubeconfig, verb}, tc.args...)...)
				assertUsageError(t, code, out, errOut, tc.want)
				if out != "" {
					t.Errorf("stdout %q: a usage mistake prints no table", out)
				}
			})
		}
		t.Run(verb+": --all-contexts on a kubeconfig without contexts is refused", func(t *testing.T) {
			code, out, errOut := run(t, nil, "--kubeconfig", empty, verb, "--all-contexts")
			assertUsageError(t, code, out, errOut, "the kubeconfig has no contexts")
		})
	}
}

// TestFleetUnreachable: contexts whose API servers do not answer are rows of their own with the
// reason; the run reports every one and exits 9.
func TestFleetUnreachable(t *testing.T) {
	servers := map[string]string{"east": refusingServer(t), "west": refusingServer(t), "north": refusingServer(t)}
	kubeconfig := writeFleetKubeconfig(t, servers)
	t.Run("status --contexts prints a row per context in the order given", func(t *testing.T) {
		code, out, errOut := run(t, nil, "--kubeconfig", kubeconfig, "status", "--contexts", "west,east", "--max-parallel", "1")
		if code != ExitUnreachable {
			t.Errorf("exit %d, want %d; stderr %q", code, ExitUnreachable, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) < 3 || !strings.HasPrefix(lines[0], "CONTEXT") ||
			!strings.HasPrefix(lines[1], "west ") || !strings.HasPrefix(lines[2], "east ") {
			t.Fatalf("table:\n%s", out)
		}
		for i, name := range []string{"west", "east"} {
			if f := strings.Fields(lines[i+1]); f[1] != "unreachable" || !strings.Contains(lines[i+1], servers[name]) {
				t.Errorf("row %q: want unreachable and the server %s", lines[i+1], servers[name])
			}
		}
	})
	for _, verb := range []string{"status", "verify"} {
		t.Run(verb+" --all-contexts -o json is one document, an entry per context sorted by name", func(t *testing.T) {
			code, out, _ := run(t, nil, "--kubeconfig", kubeconfig, verb, "--all-contexts", "-o", "json")
			if code != ExitUnreachable {
				t.Errorf("exit %d, want %d", code, ExitUnreachable)
			}
			validateDocument(t, []byte(out))
			var doc struct {
				Kind     string
				ExitCode int
				Contexts []ui.FleetStatusEntry
			}
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var names []string
			for _, e := range doc.Contexts {
				names = append(names, e.Context)
				if e.State != "unreachable" || e.ExitCode != ExitUnreachable || !strings.Contains(e.Error, servers[e.Context]) {
					t.Errorf("entry %+v", e)
				}
			}
			if strings.Join(names, ",") != "east,north,west" || doc.ExitCode != ExitUnreachable {
				t.Errorf("contexts %v, exit code %d", names, doc.ExitCode)
			}
		})
	}
}

func TestExitSeverity(t *testing.T) {
	for _, tc := range []struct {
		name  string
		codes []int
		want  int
	}{
		{"no context is success", nil, ExitOK},
		{"all healthy is success", []int{0, 0}, ExitOK},
		{"not ready is worse than nothing installed", []int{0, ExitNotInstalled, ExitNotReady}, ExitNotReady},
		{"nothing installed is worse than healthy", []int{0, ExitNotInstalled}, ExitNotInstalled},
		{"a failed GPU node is worse than not ready", []int{ExitNotReady, ExitVerifyFailed}, ExitVerifyFailed},
		{"another run's lock is worse than a failed GPU node", []int{ExitVerifyFailed, ExitLocked}, ExitLocked},
		{"unreachable is worse than any verdict", []int{ExitLocked, ExitUnreachable, ExitNotReady}, ExitUnreachable},
		{"a failed read is worse than unreachable", []int{ExitUnreachable, ExitError}, ExitError},
		{"interrupted is the worst", []int{ExitError, ExitInterrupted, ExitUnreachable}, ExitInterrupted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitSeverity().Worst(tc.codes...); got != tc.want {
				t.Errorf("worst of %v = %d, want %d", tc.codes, got, tc.want)
			}
		})
	}
}
