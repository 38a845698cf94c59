package toolchain

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gpuctl/gpuctl/e2e/upstream"
)

// Versions of the real programs the sandbox runs. They are pinned by the go.mod files under e2e/tools;
// these constants only name cache entries and stamp the Kubernetes build.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.6.16"
	KwokVersion       = "v0.8.0"
	// OperatorModuleVersion is the github.com/NVIDIA/gpu-operator module version (the v25.3.4 tag,
	// the newest the Go module proxy serves) of the fallback controller: the sandbox runs it only
	// where NVIDIA's sources of the installed release are missing (see OperatorBuild).
	OperatorModuleVersion = "v0.0.0-20250917190837-d73a0086a6ba"
)

// CacheEnv overrides where built tools are kept (default: $XDG_CACHE_HOME/gpuctl/sandbox-tools).
const CacheEnv = "GPUCTL_SANDBOX_CACHE"

// Tools are the built programs and the data files that come with them.
type Tools struct {
	// Dir is the cache directory the tools live in.
	Dir string
	// KubeAPIServer … Kwok are absolute paths of the executables.
	KubeAPIServer, KubeControllerManager, KubeScheduler, Etcd, Kwok string
	// KwokStages is kwok's kustomize/stage directory, copied from the kwok module.
	KwokStages string
	// Operators are the GPU operator controllers built from NVIDIA's sources, by release ("v26.7.0"),
	// for every release of gpuctl's catalog whose sources were found.
	Operators map[string]OperatorBuild
	// MissingSources are the catalog's releases whose sources were not found (the follower runs
	// Fallback for them, with a warning).
	MissingSources []string
	// Fallback is the controller of the Go module github.com/NVIDIA/gpu-operator@OperatorModuleVersion
	// (e2e/tools/operator); built only when some release's sources are missing, else nil.
	Fallback *OperatorBuild
}

// toolModule is one Go module under e2e/tools and the programs built from it.
type toolModule struct {
	name     string   // cache entry prefix and the e2e/tools subdirectory ("." for the root)
	subdir   string   // directory below e2e/tools
	version  string   // for the cache key and messages
	packages []string // import paths to build
	ldflags  string
	// data copies module directories into the cache entry: module path -> {source dir in module -> dest}.
	data map[string]map[string]string
	// expect is how long a cold build takes here (2 cores), for the progress message.
	expect string
}

func toolModules() []toolModule {
	var ld []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		// Without these the servers report v0.0.0-master and the GPU operator refuses the cluster
		// (observed when the sandbox's servers were first built without them).
		ld = append(ld,
			"-X "+pkg+".gitVersion="+KubernetesVersion,
			"-X "+pkg+".gitMajor=1",
			"-X "+pkg+".gitMinor=37")
	}
	return []toolModule{
		{
			name: "kubernetes", subdir: ".", version: KubernetesVersion,
			packages: []string{"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes/cmd/kube-scheduler"},
			ldflags:  strings.Join(ld, " "),
			expect:   "about 10 minutes",
		},
		{name: "etcd", subdir: "etcd", version: EtcdVersion, packages: []string{"."}, expect: "about 2 minutes"},
		{
			name: "kwok", subdir: "kwok", version: KwokVersion, packages: []string{"sigs.k8s.io/kwok/cmd/kwok"},
			data:   map[string]map[string]string{"sigs.k8s.io/kwok": {"kustomize/stage": "stages"}},
			expect: "about 1 minute",
		},
	}
}

// fallbackOperatorModule is the GPU operator module the sandbox ran before it built NVIDIA's sources,
// kept for machines without them. Its files are laid out like an OperatorBuild's.
func fallbackOperatorModule() toolModule {
	return toolModule{
		name: "gpu-operator-module", subdir: "operator", version: OperatorModuleVersion,
		packages: []string{"github.com/NVIDIA/gpu-operator/cmd/gpu-operator"},
		data: map[string]map[string]string{"github.com/NVIDIA/gpu-operator": {
			"assets": OperatorRootDir, "manifests": OperatorRootDir + "/manifests",
			"config/crd/bases": "crds", "config/samples": "samples",
		}},
		expect: "about 3 minutes",
	}
}

// ToolsSourceDir finds e2e/tools: $GPUCTL_SANDBOX_TOOLS_SRC, else next to this source file (go test and
// go run of the repository), else below the working directory's repository root.
func ToolsSourceDir() (string, error) {
	if d := os.Getenv("GPUCTL_SANDBOX_TOOLS_SRC"); d != "" {
		return d, nil
	}
	var candidates []string
	if _, file, _, ok := runtime.Caller(0); ok {
		candidates = append(candidates, filepath.Join(filepath.Dir(file), "..", "..", "tools"))
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			candidates = append(candidates, filepath.Join(d, "e2e", "tools"))
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, c := range candidates {
		if _, err := os.Stat(filepath.Join(c, "go.mod")); err == nil {
			return filepath.Clean(c), nil
		}
	}
	return "", errors.New("cannot find e2e/tools (run from the gpuctl repository or set GPUCTL_SANDBOX_TOOLS_SRC)")
}

// DefaultCacheDir is $GPUCTL_SANDBOX_CACHE, else the user cache directory's gpuctl/sandbox-tools.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find a cache directory (set %s): %w", CacheEnv, err)
	}
	return filepath.Join(base, "gpuctl", "sandbox-tools"), nil
}

// EnsureTools builds whatever is not in the cache yet and returns where everything is. A warm cache
// costs a few `go env`-sized calls; a cold one builds Kubernetes, which takes minutes. Progress goes
// to progress (nil: discarded). Concurrent callers (parallel test binaries) wait on a file lock
// instead of building twice.
func EnsureTools(ctx context.Context, cacheDir string, progress io.Writer) (*Tools, error) {
	if progress == nil {
		progress = io.Discard
	}
	cacheDir, src, goVersion, unlock, err := openCache(ctx, cacheDir, progress)
	if err != nil {
		return nil, err
	}
	defer unlock()
	dirs := map[string]string{}
	for _, m := range toolModules() {
		if dirs[m.name], err = m.ensure(ctx, src, cacheDir, goVersion, progress); err != nil {
			return nil, err
		}
	}
	k, e, kw := dirs["kubernetes"], dirs["etcd"], dirs["kwok"]
	t := &Tools{
		Dir:                   cacheDir,
		KubeAPIServer:         filepath.Join(k, "kube-apiserver"),
		KubeControllerManager: filepath.Join(k, "kube-controller-manager"),
		KubeScheduler:         filepath.Join(k, "kube-scheduler"),
		Etcd:                  filepath.Join(e, "etcd"),
		Kwok:                  filepath.Join(kw, "kwok"),
		KwokStages:            filepath.Join(kw, "stages"),
	}
	if err := ensureOperators(ctx, t, src, goVersion, progress); err != nil {
		return nil, err
	}
	return t, nil
}

// openCache resolves and creates the cache directory (cacheDir, else DefaultCacheDir), finds e2e/tools
// and the Go version, and takes the cache's lock; the caller releases it with unlock.
func openCache(ctx context.Context, cacheDir string, progress io.Writer) (dir, src, goVersion string, unlock func(), err error) {
	if cacheDir == "" {
		if cacheDir, err = DefaultCacheDir(); err != nil {
			return "", "", "", nil, err
		}
	}
	if src, err = ToolsSourceDir(); err != nil {
		return "", "", "", nil, err
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", "", "", nil, fmt.Errorf("create tool cache: %w", err)
	}
	if unlock, err = LockFile(ctx, filepath.Join(cacheDir, ".lock"), progress); err != nil {
		return "", "", "", nil, err
	}
	if goVersion, err = goCommandOutput(ctx, src, "env", "GOVERSION"); err != nil {
		unlock()
		return "", "", "", nil, err
	}
	return cacheDir, src, goVersion, unlock, nil
}

// ensure returns the module's cache entry in cacheDir, building it first when it is not complete. The
// caller holds the tool cache's lock.
func (m toolModule) ensure(ctx context.Context, src, cacheDir, goVersion string, progress io.Writer) (string, error) {
	key, err := m.cacheKey(src, goVersion)
	if err != nil {
		return "", err
	}
	dest := filepath.Join(cacheDir, m.name+"-"+m.version+"-"+key)
	if _, err := os.Stat(filepath.Join(dest, ".complete")); err == nil {
		return dest, nil
	}
	return dest, m.build(ctx, src, dest, progress)
}

// cacheKey hashes what decides the build's output: the module's files, the flags and the Go version.
func (m toolModule) cacheKey(src, goVersion string) (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, goVersion, m.ldflags, strings.Join(m.packages, " "))
	dir := filepath.Join(src, m.subdir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() || !(strings.HasSuffix(e.Name(), ".go") || e.Name() == "go.mod" || e.Name() == "go.sum") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", err
		}
		fmt.Fprintln(h, e.Name(), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

func (m toolModule) build(ctx context.Context, src, dest string, progress io.Writer) error {
	dir := filepath.Join(src, m.subdir)
	tmp, err := emptyEntry(dest)
	if err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(progress, "sandbox: building %s %s (first run only; %s on 2 cores)…\n", m.name, m.version, m.expect)
	args := []string{"build", "-v", "-o", tmp + string(filepath.Separator)}
	if m.ldflags != "" {
		args = append(args, "-ldflags", m.ldflags)
	}
	args = append(args, m.packages...)
	if err := goBuild(ctx, dir, []string{"GOWORK=off", "GOFLAGS=-mod=readonly"}, args, m.name, progress); err != nil {
		return fmt.Errorf("build %s %s in %s: %w", m.name, m.version, dir, err)
	}
	for modPath, copies := range m.data {
		modDir, err := moduleDir(ctx, dir, modPath)
		if err != nil {
			return err
		}
		for from, to := range copies {
			if err := CopyTree(filepath.Join(modDir, from), filepath.Join(tmp, to)); err != nil {
				return fmt.Errorf("copy %s/%s: %w", modPath, from, err)
			}
		}
	}
	if err := completeEntry(tmp, dest); err != nil {
		return err
	}
	fmt.Fprintf(progress, "sandbox: built %s %s in %s\n", m.name, m.version, time.Since(start).Round(time.Second))
	return nil
}

// goBuild runs `go build -v …` in dir with env added to the environment. `-v` names each package as
// it compiles it: goBuild counts them for a progress line every 30 s, and keeps the tail of the output
// for the error.
func goBuild(ctx context.Context, dir string, env, args []string, what string, progress io.Writer) error {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	var compiled atomic.Int64
	tail := newTailBuffer(40)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			compiled.Add(1)
			tail.add(sc.Text())
		}
	}()
	ticker := time.NewTicker(30 * time.Second)
	defer ticker.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-ticker.C:
			fmt.Fprintf(progress, "sandbox: building %s: %d packages compiled, %s\n", what, compiled.Load(), time.Since(start).Round(time.Second))
		}
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%w\n%s", err, tail.String())
	}
	return nil
}

// completeEntry marks a built cache entry complete and moves it into place.
// emptyEntry is the empty directory a build of the cache entry dest writes into (dest + ".tmp"), whatever
// an interrupted build left there; completeEntry moves it into place.
func emptyEntry(dest string) (string, error) {
	tmp := dest + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	return tmp, os.MkdirAll(tmp, 0o755)
}

func completeEntry(tmp, dest string) error {
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(dest); err != nil {
		return err
	}
	return os.Rename(tmp, dest)
}

// moduleDir is where the Go command keeps a dependency's source (read-only, in the module cache).
func moduleDir(ctx context.Context, dir, modPath string) (string, error) {
	out, err := goCommandOutput(ctx, dir, "mod", "download", "-json", modPath)
	if err != nil {
		return "", err
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", modPath, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", modPath, info.Error)
	}
	return info.Dir, nil
}

func goCommandOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
		}
		return "", fmt.Errorf("go %s (is Go installed?): %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// copyTree copies a directory of regular files, making the copies writable (the module cache is
// read-only, and the cache entry must be removable).
func CopyTree(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		target := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// lockFile takes an exclusive advisory lock, waiting for it without blocking the context.
func LockFile(ctx context.Context, path string, progress io.Writer) (func(), error) {
	return upstream.Lock(ctx, path, func() {
		fmt.Fprintf(progress, "sandbox: waiting for another process that is building the tools (%s)\n", path)
	})
}

// tailBuffer keeps the last n lines written to it.
type tailBuffer struct {
	n     int
	lines []string
}

func newTailBuffer(n int) *tailBuffer { return &tailBuffer{n: n} }

func (t *tailBuffer) add(line string) {
	t.lines = append(t.lines, line)
	if len(t.lines) > t.n {
		t.lines = t.lines[len(t.lines)-t.n:]
	}
}

func (t *tailBuffer) String() string { return strings.Join(t.lines, "\n") }
