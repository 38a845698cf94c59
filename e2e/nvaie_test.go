package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/release"
)

const testNGCKey = "nvapi-e2e-secret-0123456789"

// nvaieInputs writes an NLS token and an empty gridd.conf and returns the environment a CI job would
// set: the files through GPUCTL_* variables, the NGC key in NGC_API_KEY — no secret on a command line.
func nvaieInputs(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	token, gridd := filepath.Join(dir, "client_configuration_token.tok"), filepath.Join(dir, "gridd.conf")
	if err := os.WriteFile(token, []byte("nls-token-e2e"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gridd, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"GPUCTL_NLS_TOKEN_FILE": token, "GPUCTL_GRIDD_CONF_FILE": gridd, "NGC_API_KEY": testNGCKey}
}

func assertNVAIESecrets(t *testing.T, c *sandbox.Cluster, env map[string]string, output string) {
	t.Helper()
	ctx := t.Context()
	lic, err := c.Kube.CoreV1().Secrets("gpu-operator").Get(ctx, "licensing-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(lic.Data["client_configuration_token.tok"]) != "nls-token-e2e" {
		t.Errorf("licensing-config token = %q", lic.Data["client_configuration_token.tok"])
	}
	if _, ok := lic.Data["gridd.conf"]; !ok {
		t.Error("licensing-config has no gridd.conf")
	}
	pull, err := c.Kube.CoreV1().Secrets("gpu-operator").Get(ctx, "ngc-secret", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Auths map[string]struct{ Username, Password string } `json:"auths"`
	}
	if err := json.Unmarshal(pull.Data[".dockerconfigjson"], &cfg); err != nil {
		t.Fatal(err)
	}
	if a := cfg.Auths["nvcr.io/nvaie"]; a.Username != "$oauthtoken" || a.Password != testNGCKey {
		t.Errorf("ngc-secret auths %+v", cfg.Auths)
	}
	if strings.Contains(output, testNGCKey) {
		t.Error("the NGC key appears in gpuctl's output")
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &c.Kubeconfig
	rc, err := release.New(flags, "gpu-operator", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gpu-operator", "node-feature-discovery"} {
		hist, err := rc.History(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range hist {
			b, _ := json.Marshal(r.Values)
			if strings.Contains(string(b), testNGCKey) || strings.Contains(string(b), "nls-token-e2e") {
				t.Errorf("release %s revision %d holds secret material in its values", name, r.Revision)
			}
		}
	}
}

// TKGS with NVIDIA AI Enterprise without its license inputs fails before the first write.
func TestTKGSWithoutLicenseChangesNothing(t *testing.T) {
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "tkgs", GPUNodes: 1, CPUNodes: 1}, NoOperator: true})
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no inputs at all", nil, "--nls-token-file"},
		{"an empty token file", func() map[string]string {
			env := nvaieInputs(t)
			if err := os.WriteFile(env["GPUCTL_NLS_TOKEN_FILE"], nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return env
		}(), "is empty"},
		{"no NGC key", func() map[string]string {
			env := nvaieInputs(t)
			delete(env, "NGC_API_KEY")
			return env
		}(), "NGC_API_KEY is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := gpuctlEnv(t, c, tc.env, "install")
			if code != cli.ExitPreflight || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want a failure mentioning %q", code, stderr, tc.want)
			}
			if _, err := c.Kube.CoreV1().Namespaces().Get(t.Context(), "gpu-operator", metav1.GetOptions{}); err == nil {
				t.Fatal("the namespace was created: something changed before the inputs were checked")
			}
		})
	}
}
