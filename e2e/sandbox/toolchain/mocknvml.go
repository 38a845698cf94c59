package toolchain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// MockNVMLLibrary is the file name of the sandbox's mock NVML library: the name go-nvml dlopens
// (github.com/NVIDIA/go-nvml pkg/nvml/lib.go: defaultNvmlLibraryName "libnvidia-ml.so.1"), so a
// directory holding it on LD_LIBRARY_PATH stands in for a driver's.
const MockNVMLLibrary = "libnvidia-ml.so.1"

// mockNVMLPackage is the library's package in this repository (package main, built c-shared).
const mockNVMLPackage = "./e2e/sandbox/mocknvml/lib"

// EnsureMockNVML builds the mock NVML library (package e2e/sandbox/mocknvml/lib, `go build
// -buildmode=c-shared`) once per cache and returns the path of its libnvidia-ml.so.1. The cache entry
// is keyed on the Go version, go.mod and go.sum and the sources of every package of this repository
// the library is built from, so an edit to the mock rebuilds it. It needs cgo: a C compiler (`go env
// CC`); without one it fails saying so. Like EnsureTools it waits on the cache's lock.
func EnsureMockNVML(ctx context.Context, cacheDir string, progress io.Writer) (string, error) {
	b := rootBuild{
		name:   "mocknvml",
		args:   []string{"-buildmode=c-shared", "-o", MockNVMLLibrary, mockNVMLPackage},
		output: MockNVMLLibrary,
		expect: "under a minute",
		key:    func(ctx context.Context, root string) (string, error) { return sourceKey(ctx, root, mockNVMLPackage) },
	}
	return b.ensure(ctx, cacheDir, progress)
}

// rootBuild is one program built from this repository's own module (not a module under e2e/tools).
type rootBuild struct {
	name   string   // cache entry prefix
	args   []string // go build arguments after "build -v", run in the entry's temporary directory
	output string   // the file the build writes
	expect string   // a cold build's duration here, for the progress message
	key    func(ctx context.Context, root string) (string, error)
}

func (b rootBuild) ensure(ctx context.Context, cacheDir string, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	cacheDir, src, _, unlock, err := openCache(ctx, cacheDir, progress)
	if err != nil {
		return "", err
	}
	defer unlock()
	root := filepath.Dir(filepath.Dir(src))
	key, err := b.key(ctx, root)
	if err != nil {
		return "", err
	}
	dest := filepath.Join(cacheDir, b.name+"-"+key)
	if _, err := os.Stat(filepath.Join(dest, ".complete")); err == nil {
		return filepath.Join(dest, b.output), nil
	}
	if err := haveCCompiler(ctx, root); err != nil {
		return "", fmt.Errorf("build %s: %w", b.name, err)
	}
	return filepath.Join(dest, b.output), b.build(ctx, root, dest, progress)
}

func (b rootBuild) build(ctx context.Context, root, dest string, progress io.Writer) error {
	tmp, err := emptyEntry(dest)
	if err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(progress, "sandbox: building %s (first run only; %s on 2 cores)…\n", b.name, b.expect)
	args := append([]string{"build", "-v"}, b.args...)
	for i, a := range args {
		if a == "-o" {
			args[i+1] = filepath.Join(tmp, args[i+1])
		}
	}
	env := []string{"GOWORK=off", "GOFLAGS=-mod=readonly", "CGO_ENABLED=1"}
	if err := goBuild(ctx, root, env, args, b.name, progress); err != nil {
		return fmt.Errorf("build %s in %s: %w", b.name, root, err)
	}
	if err := completeEntry(tmp, dest); err != nil {
		return err
	}
	fmt.Fprintf(progress, "sandbox: built %s in %s\n", b.name, time.Since(start).Round(time.Second))
	return nil
}

// haveCCompiler fails when cgo's C compiler (`go env CC`) is not installed.
func haveCCompiler(ctx context.Context, root string) error {
	cc, err := goCommandOutput(ctx, root, "env", "CC")
	if err != nil {
		return err
	}
	if fields := strings.Fields(cc); len(fields) == 0 {
		return errors.New("cgo needs a C compiler and `go env CC` names none")
	} else if _, err := exec.LookPath(fields[0]); err != nil {
		return fmt.Errorf("cgo needs a C compiler (%s): %w", fields[0], err)
	}
	return nil
}

// moduleKey hashes what decides a build from this module's dependencies: the Go version, go.mod,
// go.sum and extra (flags, program).
func moduleKey(ctx context.Context, root, extra string) (string, error) {
	goVersion, err := goCommandOutput(ctx, root, "env", "GOVERSION")
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintln(h, goVersion, extra)
	for _, f := range []string{"go.mod", "go.sum"} {
		if err := hashFile(h, filepath.Join(root, f)); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// sourceKey is moduleKey plus the Go and C sources of every package of this module that pkg is built
// from (`go list -deps`).
func sourceKey(ctx context.Context, root, pkg string) (string, error) {
	const format = `{{with .Module}}{{if .Main}}{{$.Dir}}{{range $.GoFiles}} {{.}}{{end}}{{range $.CgoFiles}} {{.}}{{end}}{{range $.CFiles}} {{.}}{{end}}{{range $.HFiles}} {{.}}{{end}}{{end}}{{end}}`
	list, err := goCommandOutput(ctx, root, "list", "-deps", "-f", format, pkg)
	if err != nil {
		return "", err
	}
	base, err := moduleKey(ctx, root, pkg)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintln(h, base)
	for _, line := range strings.Split(list, "\n") {
		fields := strings.Fields(line)
		for _, f := range fields[min(1, len(fields)):] {
			rel, _ := filepath.Rel(root, filepath.Join(fields[0], f))
			fmt.Fprintln(h, rel)
			if err := hashFile(h, filepath.Join(fields[0], f)); err != nil {
				return "", err
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

func hashFile(w io.Writer, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, len(b))
	_, err = w.Write(b)
	return err
}
