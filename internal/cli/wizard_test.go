package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/wizard"
)

func TestWizardCommand(t *testing.T) {
	t.Run("without a terminal it refuses and prints the equivalent install command", func(t *testing.T) {
		code, _, errOut := run(t, nil, "wizard", "--profile", "rke2", "--no-taint", "--context", "prod", "--kubeconfig", "/nonexistent")
		if code != ExitUsage {
			t.Errorf("exit %d, want %d", code, ExitUsage)
		}
		if !strings.Contains(errOut, "gpuctl install --context prod --profile rke2 --no-taint") {
			t.Errorf("no equivalent command in: %s", errOut)
		}
	})

	t.Run("with CI set install --interactive refuses too", func(t *testing.T) {
		code, _, errOut := run(t, map[string]string{"CI": "true"}, "install", "--interactive", "--kubeconfig", "/nonexistent")
		if code != ExitUsage || !strings.Contains(errOut, "CI is set") || !strings.Contains(errOut, "gpuctl install") {
			t.Errorf("exit %d: %s", code, errOut)
		}
	})

	t.Run("a saved config file replays as the same install options", func(t *testing.T) {
		dir := t.TempDir()
		tok := filepath.Join(dir, "client_configuration_token.tok")
		if err := os.WriteFile(tok, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		want := engine.InstallOptions{Profile: "tkgs", OperatorVersion: "v26.3.3", NoTaint: true, Set: []string{"mig.strategy=mixed", "driver.version=550.90.07"},
			SkipChecks: []string{"host-driver"}, Timeout: 25 * time.Minute}
		want.Licensing.NLSTokenFile, want.Licensing.GriddConfFile, want.Licensing.NGCAPIKeyEnv = tok, tok, "MY_NGC_KEY"
		file := filepath.Join(dir, "gpuctl.yaml")
		if err := wizard.SaveConfig(file, want, "gpu-stack", "prod"); err != nil {
			t.Fatal(err)
		}
		// The wizard without a terminal prints the install command its options make: the file's
		// options must make the same one as the options saved.
		code, _, errOut := run(t, map[string]string{"CI": "1"}, "wizard", "--config", file, "--kubeconfig", "/nonexistent")
		if code != ExitUsage {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if cmdline := wizard.Command(want, "gpu-stack", ""); !strings.Contains(errOut, cmdline+"\n") {
			t.Errorf("replayed as:\n%s\nwant:\n  %s", errOut, cmdline)
		}
	})

	t.Run("a config file of an unknown version is a usage error", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "gpuctl.yaml")
		if err := os.WriteFile(file, []byte("version: 2\nprofile: gke\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := run(t, nil, "install", "--dry-run", "--config", file, "--kubeconfig", "/nonexistent")
		if code != ExitUsage || !strings.Contains(errOut, "version 2") {
			t.Errorf("exit %d: %s", code, errOut)
		}
	})
}
