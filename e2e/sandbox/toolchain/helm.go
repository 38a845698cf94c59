package toolchain

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuctl/gpuctl/e2e/upstream"
)

// EnsureHelmCLI builds Helm's own command line, helm.sh/helm/v4/cmd/helm at the version gpuctl's
// go.mod requires, once per cache (beside the sandbox tools), and returns its path. The e2e suites use
// it to prove that plain `helm` works on the releases gpuctl makes; `sandbox tools` builds it ahead of
// the tests. It builds from the main module with a copy of its go.mod and go.sum (-modfile), so
// dependency versions are gpuctl's and the go.sum entries cmd/helm alone needs (cobra/doc's
// go-md2man, Masterminds/vcs) are added to the copy, never to the repository.
func EnsureHelmCLI(ctx context.Context, progress io.Writer) (string, error) {
	root, err := goCommandOutput(ctx, ".", "env", "GOMOD")
	if err != nil {
		return "", err
	}
	root = filepath.Dir(root)
	version, err := goCommandOutput(ctx, root, "list", "-m", "-f", "{{.Version}}", "helm.sh/helm/v4")
	if err != nil {
		return "", fmt.Errorf("the version of helm.sh/helm/v4 in go.mod: %w", err)
	}
	return ensureHelm(ctx, progress, version, func(tmp string) (*exec.Cmd, error) {
		for _, f := range []string{"go.mod", "go.sum"} {
			b, err := os.ReadFile(filepath.Join(root, f))
			if err != nil {
				return nil, err
			}
			if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
				return nil, err
			}
		}
		cmd := exec.CommandContext(ctx, "go", "build", "-modfile", filepath.Join(tmp, "go.mod"), "-mod=mod",
			"-ldflags", "-X helm.sh/helm/v4/internal/version.version="+version,
			"-o", filepath.Join(tmp, "helm"), "helm.sh/helm/v4/cmd/helm")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOWORK=off")
		return cmd, nil
	})
}

// EnsureHelm3CLI builds Helm v3's command line, helm.sh/helm/v3/cmd/helm at the version
// e2e/tools/helm3/go.mod pins, once per cache like EnsureHelmCLI, and returns its path: Helm 3 users
// run it on the releases gpuctl makes with Helm v4's SDK, and the e2e suites prove it works.
func EnsureHelm3CLI(ctx context.Context, progress io.Writer) (string, error) {
	src, err := ToolsSourceDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(src, "helm3")
	version, err := goCommandOutput(ctx, dir, "list", "-m", "-f", "{{.Version}}", "helm.sh/helm/v3")
	if err != nil {
		return "", fmt.Errorf("the version of helm.sh/helm/v3 in %s/go.mod: %w", dir, err)
	}
	return ensureHelm(ctx, progress, version, func(tmp string) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, "go", "build",
			"-ldflags", "-X helm.sh/helm/v3/internal/version.version="+version,
			"-o", filepath.Join(tmp, "helm"), "helm.sh/helm/v3/cmd/helm")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
		return cmd, nil
	})
}

// ensureHelm returns the cache's helm-VERSION/helm, building it first with the command build prepares
// in a temporary directory (it writes TMP/helm) when the cache has none. Concurrent callers wait on a file lock instead of
// building twice.
func ensureHelm(ctx context.Context, progress io.Writer, version string, build func(tmp string) (*exec.Cmd, error)) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	cache, err := DefaultCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "helm-"+version)
	bin := filepath.Join(dir, "helm")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := upstream.Lock(ctx, filepath.Join(dir, ".lock"), func() {
		fmt.Fprintf(progress, "sandbox: waiting for another process that is building helm %s\n", version)
	})
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	fmt.Fprintf(progress, "sandbox: building helm %s (first run only)…\n", version)
	cmd, err := build(tmp)
	if err != nil {
		return "", err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build helm %s: %w\n%s", version, err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(filepath.Join(tmp, "helm"), bin); err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "sandbox: built helm %s in %s\n", version, time.Since(start).Round(time.Second))
	return bin, nil
}
