package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExport(t *testing.T) {
	t.Run("export writes a Flux stream offline, names what it leaves out on stderr", func(t *testing.T) {
		code, out, errOut := run(t, nil, "export", "--for", "flux", "--profile", "gke", "--chart-repo", "oci://registry.example.com/gpuctl", "--set", "driver.version=580.1.2")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		for _, want := range []string{"kind: HelmRelease", "kind: HelmRepository", "type: oci", "kind: ResourceQuota", "580.1.2", "crds: CreateReplace"} {
			if !strings.Contains(out, want) {
				t.Errorf("stdout lacks %q", want)
			}
		}
		if !strings.Contains(errOut, "not exported:") || !strings.Contains(errOut, "gpuctl taint") {
			t.Errorf("stderr does not say what is left out:\n%s", errOut)
		}
	})

	t.Run("export -o DIR writes one numbered file per object", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "gpu")
		code, out, errOut := run(t, nil, "export", "--for", "argocd", "--profile", "kubeadm", "--chart-repo", "https://charts.example.com", "-o", dir)
		if code != 0 || out != "" {
			t.Fatalf("exit %d, stdout %q: %s", code, out, errOut)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) < 4 || entries[0].Name() != "00-namespace-gpu-operator.yaml" || !strings.HasSuffix(entries[len(entries)-1].Name(), "-application-gpu-operator.yaml") {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("files %v", names)
		}
	})

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"without --for", []string{"--profile", "gke", "--chart-repo", "https://c.example.com"}, ExitUsage, "--for is required"},
		{"for Cluster API, whose CRDs cannot be validated against", []string{"--for", "capi", "--profile", "gke", "--chart-repo", "https://c.example.com"}, ExitUsage, "--for capi: not exported"},
		{"with --fleet for Flux", []string{"--for", "flux", "--fleet", "--profile", "gke", "--chart-repo", "https://c.example.com"}, ExitUsage, "--fleet is for --for argocd"},
		{"with a cluster selector but no fleet", []string{"--for", "argocd", "--cluster-selector", "gpu=yes", "--profile", "gke", "--chart-repo", "https://c.example.com"}, ExitUsage, "needs --fleet"},
		{"without --chart-repo", []string{"--for", "flux", "--profile", "gke"}, ExitUsage, "--chart-repo is required"},
		{"with a chart repository that is no URL", []string{"--for", "flux", "--profile", "gke", "--chart-repo", "charts"}, ExitUsage, "--chart-repo charts"},
		{"with an unknown profile", []string{"--for", "flux", "--profile", "nosuch", "--chart-repo", "https://c.example.com"}, ExitUsage, "--profile nosuch"},
		{"on OpenShift", []string{"--for", "argocd", "--profile", "openshift", "--chart-repo", "https://c.example.com"}, ExitUnsupported, "OLM Subscription"},
	} {
		t.Run("export "+tc.name+" is refused in one line with exit "+string(rune('0'+tc.code)), func(t *testing.T) {
			code, out, errOut := run(t, nil, append([]string{"export"}, tc.args...)...)
			first, _, _ := strings.Cut(errOut, "\n")
			if code != tc.code || !strings.Contains(first, tc.want) || out != "" {
				t.Errorf("exit %d (want %d), stdout %q, stderr:\n%s", code, tc.code, out, errOut)
			}
		})
	}
}

// TestExportWritesNoSecret plants an NGC API key and an NLS token in the inputs of an export whose
// values use NVIDIA AI Enterprise's Secrets: the export names the Secrets and holds neither value.
func TestExportWritesNoSecret(t *testing.T) {
	const ngcKey, nlsToken, gridd = "nvapi-PLANTED-NGC-KEY-0123456789", "PLANTED-NLS-TOKEN-abcdef", "PLANTED-GRIDD-FeatureType=1"
	tmp := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token, conf, keyFile := write("client_configuration_token.tok", nlsToken), write("gridd.conf", gridd), write("ngc.key", ngcKey)
	t.Setenv("NGC_API_KEY", ngcKey)
	for _, engine := range [][]string{{"flux"}, {"argocd"}, {"argocd", "--fleet"}, {"rke2"}} {
		for _, dest := range []string{"stdout", "dir"} {
			t.Run(strings.Join(engine, " ")+" to "+dest+" holds no Secret value", func(t *testing.T) {
				args := []string{"export", "--for", engine[0], "--profile", "tkgs", "--chart-repo", "https://charts.example.com",
					"--set", "driver.licensingConfig.secretName=licensing-config", "--set", "driver.imagePullSecrets={ngc-secret}",
					"--nls-token-file", token, "--gridd-conf-file", conf, "--ngc-api-key-file", keyFile}
				args = append(args, engine[1:]...)
				dir := filepath.Join(t.TempDir(), "out")
				if dest == "dir" {
					args = append(args, "-o", dir)
				}
				code, out, errOut := run(t, map[string]string{"NGC_API_KEY": ngcKey}, args...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errOut)
				}
				written := out + errOut
				if dest == "dir" {
					files, _ := filepath.Glob(filepath.Join(dir, "*"))
					if len(files) == 0 {
						t.Fatal("no files written")
					}
					for _, f := range files {
						b, err := os.ReadFile(f)
						if err != nil {
							t.Fatal(err)
						}
						written += string(b)
					}
				}
				for _, secret := range []string{ngcKey, nlsToken, gridd} {
					if strings.Contains(written, secret) {
						t.Errorf("the export holds the planted %q", secret)
					}
				}
				if strings.Contains(written, "kind: Secret\n") {
					t.Error("the export writes a Secret")
				}
				for _, want := range []string{"licensing-config", "ngc-secret", "never written here"} {
					if !strings.Contains(written, want) {
						t.Errorf("the export does not name %q", want)
					}
				}
			})
		}
	}
}
