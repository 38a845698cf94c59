package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), Streams{In: strings.NewReader(""), Out: &out, Err: &errOut}, args, func(k string) string { return env[k] })
	return code, out.String(), errOut.String()
}

func TestOfflineCommands(t *testing.T) {
	t.Run("profiles list names every profile with its description and marks the default", func(t *testing.T) {
		code, out, _ := run(t, nil, "profiles", "list")
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		for _, want := range []string{"kubeadm (default)", "gke", "rke2", "tkgs", "openshift", "Google Kubernetes Engine"} {
			if !strings.Contains(out, want) {
				t.Errorf("profiles list lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("profiles show prints the profile with its comments", func(t *testing.T) {
		code, out, _ := run(t, nil, "profiles", "show", "rke2")
		if code != 0 || !strings.Contains(out, "CONTAINERD_SOCKET") || !strings.Contains(out, "#") {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})

	t.Run("profiles show of an unknown profile is a usage error naming the valid ones", func(t *testing.T) {
		code, _, errOut := run(t, nil, "profiles", "show", "nope")
		if code != ExitUsage || !strings.Contains(errOut, "kubeadm") {
			t.Errorf("exit %d: %s", code, errOut)
		}
	})

	t.Run("template with a profile renders every chart in install order without a cluster", func(t *testing.T) {
		code, out, errOut := run(t, nil, "template", "--profile", "gke", "--kube-version", "1.33", "--kubeconfig", "/nonexistent",
			"--set", "driver.version=999.1")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		ns := strings.Index(out, "kind: Namespace")
		quota := strings.Index(out, "kind: ResourceQuota")
		nfd := strings.Index(out, "nfd-worker")
		policy := strings.Index(out, "kind: ClusterPolicy\n")
		if ns < 0 || quota < ns || nfd < quota || policy < nfd {
			t.Errorf("order: namespace %d, quota %d, NFD %d, ClusterPolicy %d", ns, quota, nfd, policy)
		}
		for _, want := range []string{"name: clusterpolicies.nvidia.com", "pod-security.kubernetes.io/enforce: privileged", "999.1", "/home/kubernetes/bin/nvidia"} {
			if !strings.Contains(out, want) {
				t.Errorf("template output lacks %q", want)
			}
		}
	})

	t.Run("template renders the operator release asked for: its CRDs and images, not the default's", func(t *testing.T) {
		for _, tc := range []struct {
			version  string
			gpuCRD   bool
			operator string
		}{{"v26.7.0", true, "gpu-operator:v26.7.0"}, {"v26.3.3", false, "gpu-operator:v26.3.3"}, {"25.10.1", false, "gpu-operator:v25.10.1"}} {
			code, out, errOut := run(t, nil, "template", "--profile", "kubeadm", "--kube-version", "1.33", "--operator-version", tc.version)
			if code != 0 {
				t.Fatalf("%s: exit %d: %s", tc.version, code, errOut)
			}
			if got := strings.Contains(out, "name: gpuclusters.nvidia.com"); got != tc.gpuCRD {
				t.Errorf("%s: GPUCluster CRD rendered %v, want %v", tc.version, got, tc.gpuCRD)
			}
			if !strings.Contains(out, tc.operator) {
				t.Errorf("%s: no %s image in the render", tc.version, tc.operator)
			}
		}
		if code, _, errOut := run(t, nil, "template", "--profile", "kubeadm", "--operator-version", "v1.0.0"); code != ExitUsage || !strings.Contains(errOut, "v26.7.0, v26.3.3, v25.10.1") {
			t.Errorf("unknown release: exit %d: %s", code, errOut)
		}
	})

	t.Run("version names the embedded charts", func(t *testing.T) {
		code, out, _ := run(t, nil, "version", "--client")
		if code != 0 || !strings.Contains(out, "chart gpu-operator 26.7.0 (app v26.7.0)") || !strings.Contains(out, "chart node-feature-discovery") {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})

	t.Run("a wrong output format is a usage error", func(t *testing.T) {
		code, _, errOut := run(t, nil, "detect", "-o", "xml")
		if code != ExitUsage || !strings.Contains(errOut, "-o must be one of") {
			t.Errorf("exit %d: %s", code, errOut)
		}
	})

	t.Run("an unknown command is a usage error", func(t *testing.T) {
		if code, _, _ := run(t, nil, "instal"); code != ExitUsage {
			t.Errorf("exit %d", code)
		}
	})

	t.Run("a wrong number of arguments is a usage error", func(t *testing.T) {
		for _, args := range [][]string{{"profiles", "show"}, {"detect", "extra"}, {"charts", "save"}, {"charts", "save", "a", "b"}} {
			if code, _, errOut := run(t, nil, args...); code != ExitUsage {
				t.Errorf("%v: exit %d: %s", args, code, errOut)
			}
		}
	})
}

func TestSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("profile: rke2\nkube-version: \"1.33\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	render := func(t *testing.T, env map[string]string, args ...string) string {
		t.Helper()
		code, out, errOut := run(t, env, append([]string{"template", "--config", cfg}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		return out
	}
	t.Run("the config file fills flags the user did not set", func(t *testing.T) {
		if out := render(t, nil); !strings.Contains(out, "/run/k3s/containerd/containerd.sock") {
			t.Error("profile rke2 from the config file not used")
		}
	})
	t.Run("GPUCTL_* environment variables win over the config file", func(t *testing.T) {
		if out := render(t, map[string]string{"GPUCTL_PROFILE": "gke"}); !strings.Contains(out, "/home/kubernetes/bin/nvidia") {
			t.Error("GPUCTL_PROFILE=gke not used")
		}
	})
	t.Run("flags win over both", func(t *testing.T) {
		out := render(t, map[string]string{"GPUCTL_PROFILE": "gke"}, "--profile", "kubeadm")
		if strings.Contains(out, "/home/kubernetes/bin/nvidia") || strings.Contains(out, "/run/k3s/") {
			t.Error("--profile kubeadm did not win")
		}
	})
	t.Run("the chart's Kubernetes range is enforced for the version the config file names", func(t *testing.T) {
		old := filepath.Join(dir, "old.yaml")
		if err := os.WriteFile(old, []byte("profile: kubeadm\nkube-version: \"1.31\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := run(t, nil, "template", "--config", old); code == 0 || !strings.Contains(errOut, "kubeVersion") {
			t.Errorf("exit %d: %s", code, errOut)
		}
	})
	t.Run("a broken config file is a usage error", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(bad, []byte("profile: [\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := run(t, nil, "template", "--config", bad); code != ExitUsage {
			t.Errorf("exit %d: %s", code, errOut)
		}
	})
}

func TestKubectlPlugin(t *testing.T) {
	var out, errOut bytes.Buffer
	code := RunAs(context.Background(), "kubectl-gpu", Streams{In: strings.NewReader(""), Out: &out, Err: &errOut}, []string{"install", "--help"}, func(string) string { return "" })
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "kubectl gpu install [flags]") || !strings.Contains(out.String(), "  kubectl gpu install --dry-run") {
		t.Errorf("installed as kubectl-gpu, help does not read as the plugin:\n%s", out.String())
	}
	if strings.Contains(out.String(), "gpuctl install") {
		t.Errorf("help still says gpuctl install:\n%s", out.String())
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := run(t, nil, "version", "--client")
	if code != 0 || !strings.HasPrefix(out, "gpuctl ") || !strings.Contains(out, "chart gpu-operator ") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// Help reads like kubectl's: a command's own flags first, the connection flags in `gpuctl options`.
func TestHelpKeepsConnectionFlagsInOptions(t *testing.T) {
	code, out, _ := run(t, nil, "install", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, absent := range []string{"--kubeconfig", "--certificate-authority", "--as-group", "--insecure-skip-tls-verify"} {
		if strings.Contains(out, absent+" ") {
			t.Errorf("install --help lists %s", absent)
		}
	}
	if !strings.Contains(out, "--dry-run") || !strings.Contains(out, `Use "gpuctl options"`) || !strings.Contains(out, "Global Flags:\n      --config") {
		t.Errorf("install --help:\n%s", out)
	}
	if i, j := strings.Index(out, "\nFlags:"), strings.Index(out, "\nGlobal Flags:"); i < 0 || j < i {
		t.Errorf("the command's own flags do not come first:\n%s", out)
	}
	code, out, _ = run(t, nil, "options")
	for _, want := range []string{"--kubeconfig string", "--context string", "-n, --namespace string", "--as string"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("options lacks %q (exit %d):\n%s", want, code, out)
		}
	}
	// The flags still work everywhere.
	if code, _, errOut := run(t, nil, "profiles", "list", "--kubeconfig", "/nonexistent", "-n", "gpu"); code != 0 {
		t.Errorf("profiles list with connection flags: exit %d: %s", code, errOut)
	}
}

func TestDynamicCompletion(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c1, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u1, user: {}}]
contexts: [{name: prod, context: {cluster: c1, user: u1}}, {name: lab, context: {cluster: c1, user: u1}}]
current-context: lab
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "--kubeconfig", kubeconfig, "install", "--context", ""}, []string{"lab\tcluster c1, user u1", "prod\tcluster c1, user u1"}},
		{[]string{"__complete", "--kubeconfig", kubeconfig, "status", "--contexts", "prod,"}, []string{"prod,lab\tcluster c1, user u1"}},
		{[]string{"__complete", "--kubeconfig", kubeconfig, "verify", "--contexts", ""}, []string{"lab\tcluster c1, user u1", "prod\tcluster c1, user u1"}},
		{[]string{"__complete", "install", "--profile", ""}, []string{"gke\t", "openshift\t", "tkgs\t"}},
		{[]string{"__complete", "template", "--profile", ""}, []string{"kubeadm\t"}},
		{[]string{"__complete", "install", "--operator-version", ""}, []string{"v26.7.0", "v25.10.1"}},
		{[]string{"__complete", "check", "--skip-check", "api,"}, []string{"api,permissions\t", "api,gpu-node-taints\t"}},
	} {
		code, out, errOut := run(t, nil, tc.args...)
		if code != 0 {
			t.Errorf("%v: exit %d: %s", tc.args, code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: no %q in\n%s", tc.args, w, out)
			}
		}
		if !strings.Contains(out, ":4\n") { // ShellCompDirectiveNoFileComp
			t.Errorf("%v: completion offers files:\n%s", tc.args, out)
		}
	}
}
