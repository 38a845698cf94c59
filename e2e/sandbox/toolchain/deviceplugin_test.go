package toolchain

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// NVIDIA's programs, built as NVIDIA links them, start on a machine without libnvidia-ml: go-nvml's
// NVML symbols are left unresolved at link time and bound lazily, so only a call into NVML (after
// nvml.Init found no library) could fail, and --version makes none. Each prints NVIDIA's version
// string, which the linker flags set; config-manager has no --version (its cli.App sets no Version,
// cmd/config-manager/main.go@v0.19.0), so it shows its --help.
func TestDevicePluginStartsWithoutNVML(t *testing.T) {
	if testing.Short() {
		t.Skip("builds NVIDIA's device plugin (minutes on a cold cache)")
	}
	if out, err := exec.Command("ldconfig", "-p").Output(); err == nil && strings.Contains(string(out), "libnvidia-ml.so") {
		t.Log("this machine has libnvidia-ml: the check below does not show the programs start without it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dp, err := EnsureDevicePlugin(ctx, "", testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	for bin, want := range map[string][]string{
		dp.Plugin:           {DevicePluginVersion, devicePluginCommit},
		dp.GFD:              {DevicePluginVersion, devicePluginCommit},
		dp.MPSControlDaemon: {DevicePluginVersion, devicePluginCommit},
		dp.ConfigManager:    {"--node-label"},
	} {
		arg := "--version"
		if bin == dp.ConfigManager {
			arg = "--help"
		}
		cmd := exec.CommandContext(ctx, bin, arg)
		cmd.Env = withoutLibraryPath(os.Environ())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s %s: %v\n%s", bin, arg, err, out)
			continue
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s %s says %q, want %q in it", bin, arg, out, w)
			}
		}
	}
}

// withoutLibraryPath drops LD_LIBRARY_PATH and LD_PRELOAD, so that no libnvidia-ml is found there.
func withoutLibraryPath(env []string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, "LD_LIBRARY_PATH=") && !strings.HasPrefix(e, "LD_PRELOAD=") {
			out = append(out, e)
		}
	}
	return out
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
