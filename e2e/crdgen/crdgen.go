// Package crdgen generates the gpu-operator chart's CRDs from NVIDIA's own API types: for every GPU
// Operator release in gpuctl's catalog (internal/bundle), controller-gen runs over that release's
// api/nvidia/ packages (from e2e/upstream's unmodified source tree) with descriptions left out, and the
// result becomes the chart's CRDs: the default release's in crds/, every other release's in
// releases/<tag>/crds/ (which the chart loader puts in place of crds/ for that release).
//
// `make crds` (e2e/cmd/crdgen) writes the files; e2e's regeneration test compares them. Building
// controller-gen may use the Go module proxy, as any build does; generating needs no network (the
// release trees carry vendor/). This is build infrastructure: gpuctl itself never imports it.
package crdgen

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/e2e/upstream"
	"github.com/gpuctl/gpuctl/internal/bundle"
)

// ControllerToolsVersion is the sigs.k8s.io/controller-tools version pinned in
// e2e/tools/controller-gen/go.mod; it names the cache entry and the files' header.
const ControllerToolsVersion = "v0.21.0"

// APIPackages are the packages of a GPU Operator release that hold its kubebuilder markers
// (api/nvidia/v1: ClusterPolicy; api/nvidia/v1alpha1: NVIDIADriver and, from v26.7.0, GPUCluster).
// api/versioned/ beside them is a generated clientset without markers.
const APIPackages = "./api/nvidia/..."

// ChartDir is the chart the CRDs belong to, relative to the repository root.
const ChartDir = "charts/gpu-operator"

// Release is one GPU Operator release whose CRDs the chart carries.
type Release struct {
	// Tag is NVIDIA's release tag, e.g. "v26.7.0".
	Tag string
	// Default: its CRDs go to crds/, the others' to releases/<Tag>/crds/.
	Default bool
}

// Releases is gpuctl's catalog of GPU Operator releases.
func Releases() []Release {
	var out []Release
	for _, b := range bundle.List() {
		out = append(out, Release{Tag: b.Version, Default: b.Default})
	}
	return out
}

// Dir is where a release's CRDs live, relative to the chart directory.
func (r Release) Dir() string {
	if r.Default {
		return "crds"
	}
	return filepath.Join("releases", r.Tag, "crds")
}

// Generate runs controller-gen (the executable at controllerGen) over each release's API types and
// returns every file the chart must hold: path relative to the chart directory -> contents. One file
// per CRD, named <plural>.<group>.yaml, with a header saying where it comes from.
func Generate(ctx context.Context, controllerGen string, releases []Release, progress io.Writer) (map[string][]byte, error) {
	if progress == nil {
		progress = io.Discard
	}
	out := map[string][]byte{}
	for _, r := range releases {
		start := time.Now()
		tree, err := upstream.Tree(ctx, r.Tag)
		if err != nil {
			return nil, err
		}
		files, err := generateOne(ctx, controllerGen, tree, r.Tag)
		if err != nil {
			return nil, fmt.Errorf("generate the CRDs of %s: %w", r.Tag, err)
		}
		for name, data := range files {
			out[filepath.Join(r.Dir(), name)] = data
		}
		fmt.Fprintf(progress, "crdgen: %s: %d CRDs in %s\n", r.Tag, len(files), time.Since(start).Round(time.Second))
	}
	return out, nil
}

func generateOne(ctx context.Context, controllerGen, tree, tag string) (map[string][]byte, error) {
	tmp, err := os.MkdirTemp("", "crdgen-"+tag+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, controllerGen, "crd:maxDescLen=0", "paths="+APIPackages, "output:crd:dir="+tmp)
	cmd.Dir = tree
	// The tree's vendor/ has every dependency of its API packages: loading them needs no module proxy,
	// and GOPROXY=off makes sure of it. GOTOOLCHAIN=local: never download a Go toolchain either.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=vendor", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("controller-gen in %s: %w\n%s", tree, err, stderr.String())
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(tmp, e.Name()))
		if err != nil {
			return nil, err
		}
		var meta struct {
			Kind string `json:"kind"`
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Plural string `json:"plural"`
				} `json:"names"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(data, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		if meta.Kind != "CustomResourceDefinition" || meta.Spec.Group == "" || meta.Spec.Names.Plural == "" {
			return nil, fmt.Errorf("%s: not a CustomResourceDefinition", e.Name())
		}
		name := meta.Spec.Names.Plural + "." + meta.Spec.Group + ".yaml"
		files[name] = append([]byte(header(tag)), bytes.TrimPrefix(data, []byte("---\n"))...)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("controller-gen wrote no CRD for %s in %s", APIPackages, tree)
	}
	return files, nil
}

func header(tag string) string {
	return "# Generated by `make crds` (e2e/cmd/crdgen) with controller-gen " + ControllerToolsVersion +
		" from NVIDIA/gpu-operator " + tag + " api/nvidia/ (descriptions left out).\n" +
		"# Do not edit: run `make crds` instead.\n"
}

// Existing lists the CRD files the chart at chartDir holds now, relative to it: crds/*.yaml and
// releases/*/crds/*.yaml.
func Existing(chartDir string) ([]string, error) {
	var out []string
	for _, pattern := range []string{filepath.Join("crds", "*.yaml"), filepath.Join("releases", "*", "crds", "*.yaml")} {
		m, err := fs.Glob(os.DirFS(chartDir), filepath.ToSlash(pattern))
		if err != nil {
			return nil, err
		}
		for _, p := range m {
			out = append(out, filepath.FromSlash(p))
		}
	}
	slices.Sort(out)
	return out, nil
}

// Write makes the chart at chartDir hold exactly files (from Generate): it writes those that differ
// and removes CRD files no release produces. It returns what it changed.
func Write(chartDir string, files map[string][]byte) ([]string, error) {
	var changed []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		p := filepath.Join(chartDir, name)
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, files[name]) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return changed, err
		}
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return changed, err
		}
		changed = append(changed, "wrote "+name)
	}
	existing, err := Existing(chartDir)
	if err != nil {
		return changed, err
	}
	for _, name := range existing {
		if _, ok := files[name]; ok {
			continue
		}
		if err := os.Remove(filepath.Join(chartDir, name)); err != nil {
			return changed, err
		}
		changed = append(changed, "removed "+name)
		// A release that left the catalog leaves nothing behind.
		for d := filepath.Dir(filepath.Join(chartDir, name)); d != chartDir && d != filepath.Join(chartDir, "releases"); d = filepath.Dir(d) {
			if os.Remove(d) != nil {
				break
			}
		}
	}
	return changed, nil
}

// RepoRoot is the gpuctl checkout (see upstream.RepoRoot).
func RepoRoot() (string, error) {
	return upstream.RepoRoot()
}

// ControllerGen returns the path of controller-gen built from e2e/tools/controller-gen, building it
// into the tool cache ($GPUCTL_SANDBOX_CACHE, else the user cache's gpuctl/sandbox-tools) when the
// cache has no build for that module's go.mod, go.sum and the Go version. Concurrent callers wait on a
// file lock instead of building twice.
func ControllerGen(ctx context.Context, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	src := filepath.Join(root, "e2e", "tools", "controller-gen")
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	goVersion, err := goEnv(ctx, src, "GOVERSION")
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintln(h, goVersion)
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintln(h, f, len(b))
		h.Write(b)
	}
	dest := filepath.Join(cache, "controller-gen-"+ControllerToolsVersion+"-"+hex.EncodeToString(h.Sum(nil))[:12])
	bin := filepath.Join(dest, "controller-gen")
	if _, err := os.Stat(filepath.Join(dest, ".complete")); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	unlock, err := upstream.Lock(ctx, dest+".lock", nil)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(dest, ".complete")); err == nil {
		return bin, nil
	}
	start := time.Now()
	fmt.Fprintf(progress, "crdgen: building controller-gen %s (first run only; about a minute)…\n", ControllerToolsVersion)
	tmp := dest + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(tmp, "controller-gen"), "sigs.k8s.io/controller-tools/cmd/controller-gen")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build controller-gen %s in %s: %w\n%s", ControllerToolsVersion, src, err, out)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.RemoveAll(dest); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dest); err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "crdgen: built controller-gen %s in %s\n", ControllerToolsVersion, time.Since(start).Round(time.Second))
	return bin, nil
}

func cacheDir() (string, error) {
	if d := os.Getenv(upstream.CacheEnv); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find a cache directory (set %s): %w", upstream.CacheEnv, err)
	}
	return filepath.Join(base, "gpuctl", "sandbox-tools"), nil
}

func goEnv(ctx context.Context, dir, name string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "env", name)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env %s (is Go installed?): %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}
