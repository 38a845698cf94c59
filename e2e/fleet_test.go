package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	docschema "github.com/gpuctl/gpuctl/e2e/schema"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// TestFleet runs gpuctl status and verify over three sandboxes named as contexts of one kubeconfig:
// two with a healthy stack, one whose validators are gone for good. status prints one table with a
// row per context and exits 4 (the worst); -o json is one document with an entry per context; a
// context whose API server does not answer is a row of its own that does not stop the others.
func TestFleet(t *testing.T) {
	t.Parallel()
	healthyA, healthyB, broken := cleanSandbox(t, day2Scenario), cleanSandbox(t, day2Scenario), cleanSandbox(t, day2Scenario)
	// The three installs run side by side, as a fleet's would (t.Errorf: no FailNow off the test's
	// goroutine).
	var wg sync.WaitGroup
	for _, s := range []*sharedSandbox{healthyA, healthyB, broken} {
		wg.Go(func() {
			if code, _, stderr := gpuctl(t, s.Cluster, "install"); code != 0 {
				t.Errorf("install on %s exited %d:\n%s", s.Dir, code, stderr)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	breakValidators(t, broken.Cluster)
	kubeconfig := mergedKubeconfig(t, map[string]string{
		"gpu-east": healthyA.Kubeconfig, "gpu-west": healthyB.Kubeconfig, "gpu-lab": broken.Kubeconfig,
	})
	contexts := "gpu-west,gpu-lab,gpu-east"

	t.Run("status over three contexts prints one table, a row per context in the order given, and exits 4", func(t *testing.T) {
		code, stdout, stderr := fleetGpuctl(t, kubeconfig, "status", "--contexts", contexts)
		if code != cli.ExitNotReady {
			t.Fatalf("exit %d, want %d:\n%s\n%s", code, cli.ExitNotReady, stdout, stderr)
		}
		rows := tableRows(t, stdout)
		if len(rows) != 3 {
			t.Fatalf("%d rows, want 3:\n%s", len(rows), stdout)
		}
		for i, want := range []struct{ context, state string }{{"gpu-west", "healthy"}, {"gpu-lab", "not-ready"}, {"gpu-east", "healthy"}} {
			if rows[i][0] != want.context || rows[i][1] != want.state {
				t.Errorf("row %d: %v, want context %s state %s", i, rows[i], want.context, want.state)
			}
		}
		// The broken stack's first failed check: breakValidators scaled the operator to zero.
		if why := strings.Join(rows[1][6:], " "); !strings.Contains(why, "gpu-operator") || !strings.Contains(why, "not available") {
			t.Errorf("the not-ready row does not say why (%q):\n%s", why, stdout)
		}
	})

	t.Run("status -o json over three contexts is one document with three entries and each one's status", func(t *testing.T) {
		code, stdout, _ := fleetGpuctl(t, kubeconfig, "status", "--contexts", contexts, "-o", "json")
		if code != cli.ExitNotReady {
			t.Errorf("exit %d, want %d", code, cli.ExitNotReady)
		}
		if kind, err := docschema.Validate([]byte(stdout)); err != nil || kind != "FleetStatus" {
			t.Errorf("-o json (%s) does not match its schema: %v", kind, err)
		}
		var doc ui.FleetStatus
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		if doc.ExitCode != cli.ExitNotReady || len(doc.Contexts) != 3 {
			t.Fatalf("exit code %d, %d entries:\n%s", doc.ExitCode, len(doc.Contexts), stdout)
		}
		for i, want := range []struct {
			context string
			code    int
			healthy bool
		}{{"gpu-west", 0, true}, {"gpu-lab", cli.ExitNotReady, false}, {"gpu-east", 0, true}} {
			e := doc.Contexts[i]
			if e.Context != want.context || e.ExitCode != want.code || e.Result == nil || e.Result.Healthy != want.healthy {
				t.Errorf("entry %d: context %s, exit %d, result %+v; want %+v", i, e.Context, e.ExitCode, e.Result, want)
			}
		}
	})

	t.Run("status over --all-contexts lists every context of the kubeconfig, sorted", func(t *testing.T) {
		code, stdout, _ := fleetGpuctl(t, kubeconfig, "status", "--all-contexts")
		if code != cli.ExitNotReady {
			t.Errorf("exit %d, want %d", code, cli.ExitNotReady)
		}
		var got []string
		for _, r := range tableRows(t, stdout) {
			got = append(got, r[0])
		}
		if strings.Join(got, ",") != "gpu-east,gpu-lab,gpu-west" {
			t.Errorf("contexts %v", got)
		}
	})

	t.Run("a context whose API server does not answer is a row with the reason and exits 9, the others still reported", func(t *testing.T) {
		unreachable := filepath.Join(t.TempDir(), "kubeconfig")
		cfg := loadKubeconfig(t, kubeconfig)
		// A port nothing listens on: the connection is refused at once.
		cfg.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
		cfg.Contexts["gpu-gone"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: "gpu-east"}
		if err := clientcmd.WriteToFile(*cfg, unreachable); err != nil {
			t.Fatal(err)
		}
		code, stdout, _ := fleetGpuctl(t, unreachable, "status", "--contexts", "gpu-east,gpu-gone")
		if code != cli.ExitUnreachable {
			t.Errorf("exit %d, want %d:\n%s", code, cli.ExitUnreachable, stdout)
		}
		rows := tableRows(t, stdout)
		if len(rows) != 2 || rows[0][1] != "healthy" || rows[1][0] != "gpu-gone" || rows[1][1] != "unreachable" {
			t.Errorf("rows %v:\n%s", rows, stdout)
		}
	})

	t.Run("an unknown context is a usage mistake before any cluster is asked", func(t *testing.T) {
		code, stdout, stderr := fleetGpuctl(t, kubeconfig, "status", "--contexts", "gpu-east,gpu-nowhere")
		if code != cli.ExitUsage || stdout != "" || !strings.Contains(stderr, "gpu-nowhere") {
			t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
	})

	t.Run("verify over the healthy contexts passes every GPU node of each and exits 0", func(t *testing.T) {
		code, stdout, stderr := fleetGpuctl(t, kubeconfig, "verify", "--contexts", "gpu-east,gpu-west", "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d:\n%s\n%s", code, stdout, stderr)
		}
		if kind, err := docschema.Validate([]byte(stdout)); err != nil || kind != "FleetVerify" {
			t.Errorf("-o json (%s) does not match its schema: %v", kind, err)
		}
		var doc ui.FleetVerify
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Contexts) != 2 {
			t.Fatalf("%d entries", len(doc.Contexts))
		}
		for _, e := range doc.Contexts {
			if e.ExitCode != 0 || e.Result == nil || !e.Result.Passed || len(e.Result.Nodes) != len(simulatedGPUNodes(healthyA.Cluster)) {
				t.Errorf("%s: exit %d, result %+v", e.Context, e.ExitCode, e.Result)
			}
		}
		for _, s := range []*sharedSandbox{healthyA, healthyB} {
			assertNoVerifyPods(t, s.Cluster)
		}
	})
}

// mergedKubeconfig writes one kubeconfig with a context (and a cluster and user of the same name) per
// sandbox kubeconfig of contexts, as a fleet's operator keeps them.
func mergedKubeconfig(t *testing.T, contexts map[string]string) string {
	t.Helper()
	merged := clientcmdapi.NewConfig()
	for name, file := range contexts {
		cfg := loadKubeconfig(t, file)
		cur := cfg.Contexts[cfg.CurrentContext]
		if cur == nil {
			t.Fatalf("%s has no current context", file)
		}
		merged.Clusters[name] = cfg.Clusters[cur.Cluster]
		merged.AuthInfos[name] = cfg.AuthInfos[cur.AuthInfo]
		merged.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*merged, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// loadKubeconfig reads a kubeconfig with its file paths made absolute.
func loadKubeconfig(t *testing.T, file string) *clientcmdapi.Config {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.ResolveLocalPaths(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// fleetGpuctl runs the real command line in-process with a kubeconfig of many contexts.
func fleetGpuctl(t *testing.T, kubeconfig string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append([]string{"--kubeconfig", kubeconfig, "--progress", "plain"}, args...)
	code := cli.Run(context.Background(), cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut}, args, func(string) string { return "" })
	t.Logf("gpuctl %s → exit %d\n%s\n%s", strings.Join(args[4:], " "), code, out.String(), errOut.String())
	return code, out.String(), errOut.String()
}

// tableRows are a printed table's rows below its header, split into columns.
func tableRows(t *testing.T, table string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "CONTEXT") {
		t.Fatalf("no table with a CONTEXT column:\n%s", table)
	}
	var rows [][]string
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) == "" {
			break
		}
		rows = append(rows, strings.Fields(l))
	}
	return rows
}
