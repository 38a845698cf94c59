package e2e

import (
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
)

// TKGS with NVIDIA AI Enterprise without its license inputs fails before the first write.
func TestTKGSWithoutLicenseChangesNothing(t *testing.T) {
	t.Parallel()
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
