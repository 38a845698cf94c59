// Package upstream finds NVIDIA's GPU Operator sources of the releases gpuctl installs, so that tests
// and build commands can use the real thing: the sandbox builds each release's controller from them,
// `make crds` generates each release's CRDs from their api/ types, and the chart oracle test renders
// NVIDIA's own chart of the same release next to ours.
//
// The sources are NVIDIA's release tags, unmodified, either as `git archive` tarballs
// (gpu-operator-TAG.tar.gz, with a SHA256SUMS file beside them, each unpacking into gpu-operator-TAG/
// with its vendor/ tree) or as git clones named gpu-operator-TAG. They live in the directory named by
// $GPUCTL_GPU_OPERATOR_SOURCES. Nothing here reaches the network: where the sources are missing, the
// error says how to get them.
//
// This package is test and build infrastructure; gpuctl itself never reads it.
package upstream

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// SourcesEnv names the directory that holds NVIDIA's sources (tarballs or clones).
const SourcesEnv = "GPUCTL_GPU_OPERATOR_SOURCES"

// RequireEnv, when set to a true value (CI sets it), turns "sources missing" from a skip into a test
// failure, so a CI machine without them cannot pass by skipping.
const RequireEnv = "GPUCTL_REQUIRE_GPU_OPERATOR_SOURCES"

// CacheEnv overrides where unpacked trees are kept (shared with the sandbox's tool cache).
const CacheEnv = "GPUCTL_SANDBOX_CACHE"

// ErrNoSources is returned (wrapped, with how to get them) when a release's sources are not there.
var ErrNoSources = errors.New("NVIDIA GPU Operator sources not found")

// Required reports whether missing sources must fail a test rather than skip it.
func Required() bool {
	switch strings.ToLower(os.Getenv(RequireEnv)) {
	case "1", "true", "yes":
		return true
	}
	return false
}

// HowToGet says how to provide the sources of tag.
func HowToGet(tag string) string {
	return fmt.Sprintf("git clone --depth 1 --branch %s https://github.com/NVIDIA/gpu-operator \"$%s/gpu-operator-%s\"",
		tag, SourcesEnv, tag)
}

// SourcesDir is $GPUCTL_GPU_OPERATOR_SOURCES, else third_party/gpu-operator in the directory that holds
// the gpuctl checkout (the layout of this project's development and CI machines), if it exists.
func SourcesDir() (string, error) {
	if d := os.Getenv(SourcesEnv); d != "" {
		return d, nil
	}
	if root, err := RepoRoot(); err == nil {
		for _, c := range []string{
			filepath.Join(filepath.Dir(root), "shared", "third_party", "gpu-operator"),
			filepath.Join(filepath.Dir(root), "third_party", "gpu-operator"),
		} {
			if st, err := os.Stat(c); err == nil && st.IsDir() {
				return c, nil
			}
		}
	}
	return "", fmt.Errorf("%w: set %s to a directory holding gpu-operator-TAG.tar.gz archives or gpu-operator-TAG clones", ErrNoSources, SourcesEnv)
}

// RepoRoot is the gpuctl checkout this file is in (go test, go run), else the working directory's.
func RepoRoot() (string, error) {
	var starts []string
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, s := range starts {
		for d := s; ; d = filepath.Dir(d) {
			if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/gpuctl/gpuctl\n") {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", errors.New("cannot find the gpuctl repository (run from inside it)")
}

// Tree returns a directory holding the source tree of release tag ("v26.7.0"): a clone named
// gpu-operator-TAG in the sources directory as it is, else the tarball unpacked (once, checksum
// verified) into the cache. Treat the tree as read-only; parallel callers share it.
func Tree(ctx context.Context, tag string) (string, error) {
	src, err := SourcesDir()
	if err != nil {
		return "", fmt.Errorf("%w\n  to get %s: %s", err, tag, HowToGet(tag))
	}
	clone := filepath.Join(src, "gpu-operator-"+tag)
	if st, err := os.Stat(filepath.Join(clone, "go.mod")); err == nil && !st.IsDir() {
		return clone, nil
	}
	archive := filepath.Join(src, "gpu-operator-"+tag+".tar.gz")
	if _, err := os.Stat(archive); err != nil {
		return "", fmt.Errorf("%w: neither %s nor %s exists\n  to get it: %s", ErrNoSources, clone, archive, HowToGet(tag))
	}
	sum, err := checksum(archive)
	if err != nil {
		return "", err
	}
	if want, ok, err := listedChecksum(src, filepath.Base(archive)); err != nil {
		return "", err
	} else if ok && want != sum {
		return "", fmt.Errorf("%s: sha256 %s, SHA256SUMS says %s", archive, sum, want)
	}
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	dest := filepath.Join(cache, "gpu-operator-"+tag+"-"+sum[:12])
	tree := filepath.Join(dest, "gpu-operator-"+tag)
	if _, err := os.Stat(filepath.Join(dest, ".complete")); err == nil {
		return tree, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	unlock, err := Lock(ctx, dest+".lock", nil)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(dest, ".complete")); err == nil {
		return tree, nil
	}
	tmp := dest + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	if err := unpack(archive, tmp); err != nil {
		return "", fmt.Errorf("unpack %s: %w", archive, err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "gpu-operator-"+tag, "go.mod")); err != nil {
		return "", fmt.Errorf("%s does not unpack into gpu-operator-%s/", archive, tag)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), []byte(sum+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.RemoveAll(dest); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dest); err != nil {
		return "", err
	}
	return tree, nil
}

// Key identifies the sources of tag for cache keys: the tarball's checksum, or "clone" plus the
// clone's HEAD file contents for a clone. Empty when the sources are missing.
func Key(tag string) string {
	src, err := SourcesDir()
	if err != nil {
		return ""
	}
	clone := filepath.Join(src, "gpu-operator-"+tag)
	if commit := headCommit(filepath.Join(clone, ".git")); commit != "" {
		return "clone-" + commit
	}
	if sum, err := checksum(filepath.Join(src, "gpu-operator-"+tag+".tar.gz")); err == nil {
		return sum[:12]
	}
	if _, err := os.Stat(filepath.Join(clone, "go.mod")); err == nil {
		return "tree"
	}
	return ""
}

// headCommit is the commit a clone's HEAD points at (a detached HEAD, a loose ref or a packed ref), so
// a clone moved to another commit gets another cache key; "" when it cannot be read.
func headCommit(gitDir string) string {
	b, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return ""
	}
	head := strings.TrimSpace(string(b))
	ref, isRef := strings.CutPrefix(head, "ref: ")
	if !isRef {
		return head
	}
	if b, err := os.ReadFile(filepath.Join(gitDir, filepath.FromSlash(ref))); err == nil {
		return strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile(filepath.Join(gitDir, "packed-refs")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[1] == ref {
				return f[0]
			}
		}
	}
	return ""
}

func cacheDir() (string, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return filepath.Join(d, "gpu-operator-src"), nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find a cache directory (set %s): %w", CacheEnv, err)
	}
	return filepath.Join(base, "gpuctl", "gpu-operator-src"), nil
}

func checksum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// listedChecksum reads name's line of SHA256SUMS in dir, if the file exists.
func listedChecksum(dir, name string) (string, bool, error) {
	f, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && strings.TrimPrefix(fields[1], "*") == name {
			return fields[0], true, nil
		}
	}
	return "", false, sc.Err()
}

// unpack extracts a gzipped tar of directories, regular files and symlinks into dir, refusing paths
// that leave it.
func unpack(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if rel, err := filepath.Rel(dir, target); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("entry %q leaves the archive's directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if h.Mode&0o111 != 0 {
				mode = 0o755
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, tr); err != nil {
				out.Close()
				return err
			}
			if err := out.Close(); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
		}
	}
}

// Lock takes an exclusive advisory lock on path (created if missing), for build steps that parallel
// test binaries share. onWait (may be nil) is called once if another process holds it. It waits
// without blocking the context; the returned func releases it.
func Lock(ctx context.Context, path string, onWait func()) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	for waited := false; ; waited = true {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !waited && onWait != nil {
			onWait()
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
