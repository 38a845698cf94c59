package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/kube/kubetest"
)

// guard bounds every run against an unreachable API server: far above the request timeout (5 s by
// default) and far below the test's own timeout. A run the guard ends has failed the test: it did
// not give up on its own.
const guard = 60 * time.Second

// TestUnreachableCluster: every verb that talks to the cluster, pointed at an API server that
// refuses connections or at one that accepts them and never answers, ends on its own with exit 9
// and one line on stderr that names the server and says what happened. It needs no cluster.
func TestUnreachableCluster(t *testing.T) {
	refused := refusingServer(t)
	blackhole := kubetest.Blackhole(t, nil)
	verbs := [][]string{
		{"detect"},
		{"check", "--pre"},
		{"install"},
		{"install", "--dry-run"},
		{"upgrade"},
		{"uninstall", "--yes"},
		{"status"},
		{"taint"},
		{"untaint"},
		{"verify"},
		{"diagnose", "-o", filepath.Join(t.TempDir(), "bundle.tar.gz")},
		{"images"},
		{"template"},
		{"version"},
		{"version", "-o", "json"},
	}
	for _, server := range []struct {
		name, url string
		flags     []string // --request-timeout short for the many blackhole runs; one runs with the default
		reason    string
	}{
		{"refusing", refused, nil, "connection refused"},
		{"never answering", blackhole, []string{"--request-timeout", "1s"}, "no answer within 1s"},
	} {
		kubeconfig := writeKubeconfig(t, server.url)
		for _, verb := range verbs {
			t.Run(server.name+"/"+strings.Join(verb[:1], " "), func(t *testing.T) {
				t.Parallel()
				args := append(append([]string{"--kubeconfig", kubeconfig}, server.flags...), verb...)
				assertUnreachable(t, args, server.url, server.reason)
			})
		}
	}
	t.Run("never answering, with the default request timeout", func(t *testing.T) {
		t.Parallel()
		assertUnreachable(t, []string{"--kubeconfig", writeKubeconfig(t, blackhole), "detect"}, blackhole,
			fmt.Sprintf("no answer within %s", kube.DefaultRequestTimeout))
	})
	t.Run("the wizard's backend", func(t *testing.T) {
		t.Parallel()
		kubeconfig, ns := writeKubeconfig(t, refused), "gpu-operator"
		g := &globals{kube: genericclioptions.NewConfigFlags(true)}
		g.kube.KubeConfig, g.kube.Namespace = &kubeconfig, &ns
		ctx, cancel := context.WithTimeout(t.Context(), guard)
		defer cancel()
		_, err := (&clusterBackend{g: g}).Check(ctx, "test", engine.InstallOptions{})
		if ctx.Err() != nil {
			t.Fatalf("the wizard's check still ran after %s", guard)
		}
		var u *kube.UnreachableError
		if !errors.As(err, &u) || u.Server != refused {
			t.Fatalf("the wizard's check: %v, want a kube.UnreachableError naming %s", err, refused)
		}
		var b bytes.Buffer
		if code := report(&b, err); code != ExitUnreachable {
			t.Errorf("exit %d, want %d", code, ExitUnreachable)
		}
	})
}

// assertUnreachable runs gpuctl with args and asserts that it ended on its own, with exit 9 and one
// line on stderr naming server and reason.
func assertUnreachable(t *testing.T, args []string, server, reason string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	var out, errOut bytes.Buffer
	code := Run(ctx, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut}, args, func(string) string { return "" })
	if ctx.Err() != nil {
		t.Fatalf("gpuctl %s was still running after %s (exit %d, stderr %q)", strings.Join(args[2:], " "), guard, code, errOut.String())
	}
	if code != ExitUnreachable {
		t.Errorf("exit %d, want %d (stderr %q)", code, ExitUnreachable, errOut.String())
	}
	want := fmt.Sprintf("gpuctl: cannot reach the Kubernetes API server at %s: %s\n", server, reason)
	if errOut.String() != want {
		t.Errorf("stderr:\n%q\nwant one line:\n%q", errOut.String(), want)
	}
}

// TestInterruptWhileUnreachable: Ctrl-C ends gpuctl waiting for an API server that never answers
// with the interrupted exit code, not after the request timeout. It runs the real binary, so the
// signal goes through main's handling.
func TestInterruptWhileUnreachable(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT on Windows")
	}
	bin := buildGpuctl(t)
	accepted := make(chan struct{}, 1)
	server := kubetest.Blackhole(t, accepted)
	kubeconfig := writeKubeconfig(t, server)
	// install judges its inputs before it asks the server, so its interruption is install's own line.
	for _, tc := range []struct {
		verb []string
		want string
	}{
		{[]string{"detect"}, "gpuctl: interrupted\n"},
		{[]string{"install"}, "gpuctl: interrupted before the first write: nothing was changed.\n"},
		{[]string{"version"}, "gpuctl: interrupted\n"},
	} {
		verb := tc.verb
		t.Run(verb[0], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), guard)
			defer cancel()
			// A request timeout far beyond the guard: only the signal can end this run in time.
			args := append([]string{"--kubeconfig", kubeconfig, "--request-timeout", "10m"}, verb...)
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = append(os.Environ(), "NO_COLOR=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-accepted: // gpuctl is waiting for the API server: interrupt it now
			case <-ctx.Done():
				t.Fatalf("gpuctl %s never connected", verb[0])
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			if ctx.Err() != nil {
				t.Fatalf("gpuctl %s was still running %s after SIGINT", verb[0], guard)
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != ExitInterrupted {
				t.Fatalf("gpuctl %s after SIGINT: %v, want exit %d\n%s", verb[0], err, ExitInterrupted, stderr.String())
			}
			if got := stderr.String(); got != tc.want {
				t.Errorf("stderr %q, want one line: %q", got, tc.want)
			}
		})
	}
}

// buildGpuctl builds cmd/gpuctl into the test's temporary directory.
func buildGpuctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gpuctl")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "../../cmd/gpuctl")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gpuctl: %v\n%s", err, out)
	}
	return bin
}

// refusingServer is the URL of an API server that refuses connections: a port that was opened and
// closed again.
func refusingServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "https://" + addr
}

// writeKubeconfig writes a kubeconfig whose one context points at server, with a token.
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    insecure-skip-tls-verify: true
contexts:
- name: test
  context: {cluster: test, user: test}
current-context: test
users:
- name: test
  user: {token: test-token}
`, server)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
