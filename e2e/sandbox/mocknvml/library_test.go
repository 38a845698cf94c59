package mocknvml_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml"
	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
)

// The library's tests build libnvidia-ml.so.1 (toolchain.EnsureMockNVML, into the sandbox's tool
// cache) and load it the ways NVIDIA's code does: the probe (go-nvml and go-nvlib, as the device
// plugin uses them), NVIDIA's gpu-feature-discovery v0.19.0 and nvidia-device-plugin v0.19.0.

// library builds (or finds) the library, skipping in -short mode and without a C compiler.
func library(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a cgo shared library (-short)")
	}
	cc, err := exec.Command("go", "env", "CC").Output()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath(strings.TrimSpace(string(cc))); err != nil {
		t.Skipf("no C compiler for cgo (%s)", strings.TrimSpace(string(cc)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	lib, err := toolchain.EnsureMockNVML(ctx, "", testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// writeConfig stores cfg for one test and returns the environment that points the library at it.
func writeConfig(t *testing.T, cfg mocknvml.Config) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nvml.json")
	if err := cfg.Write(path); err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(), mocknvml.ConfigEnv+"="+path)
}

// run runs a program to its end, failing the test on an error, and returns its standard output.
func run(t *testing.T, env []string, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Env, cmd.Stderr = env, &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, stderr.String())
	}
	return out
}

// goBuild builds a package of this module (or a dependency's) into dir.
func goBuild(t *testing.T, dir, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

func newConfig(t *testing.T, model string, n int, mig ...[]string) mocknvml.Config {
	t.Helper()
	cfg, err := mocknvml.NewConfig("node-a", model, n)
	if err != nil {
		t.Fatal(err)
	}
	for i, profiles := range mig {
		if err := cfg.EnableMIG(i, profiles...); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

func mustJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

func equalJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %s\nwant %s", what, mustJSON(got), mustJSON(want))
	}
}
