package upstream

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeArchive makes a gpu-operator-TAG.tar.gz holding files (path below gpu-operator-TAG/ -> body).
func writeArchive(t *testing.T, dir, tag string, files map[string]string) string {
	t.Helper()
	path := filepath.Join(dir, "gpu-operator-"+tag+".tar.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []interface{ Close() error }{tw, gz, f} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func sumOf(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestTree(t *testing.T) {
	t.Run("a tarball is unpacked once into the cache and its tree returned", func(t *testing.T) {
		src, cache := t.TempDir(), t.TempDir()
		t.Setenv(SourcesEnv, src)
		t.Setenv(CacheEnv, cache)
		a := writeArchive(t, src, "v1.2.3", map[string]string{"gpu-operator-v1.2.3/go.mod": "module x\n", "gpu-operator-v1.2.3/api/a.go": "package api\n"})
		if err := os.WriteFile(filepath.Join(src, "SHA256SUMS"), []byte(sumOf(t, a)+"  gpu-operator-v1.2.3.tar.gz\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		dir, err := Tree(context.Background(), "v1.2.3")
		if err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "api", "a.go")); err != nil || string(b) != "package api\n" {
			t.Fatalf("unpacked api/a.go = %q, %v", b, err)
		}
		if !strings.HasPrefix(dir, cache) {
			t.Errorf("tree %s is not in the cache %s", dir, cache)
		}
		again, err := Tree(context.Background(), "v1.2.3")
		if err != nil || again != dir {
			t.Errorf("second call: %s, %v; want %s", again, err, dir)
		}
		if Key("v1.2.3") != sumOf(t, a)[:12] {
			t.Errorf("Key = %q", Key("v1.2.3"))
		}
	})
	t.Run("a tarball whose checksum disagrees with SHA256SUMS is refused", func(t *testing.T) {
		src := t.TempDir()
		t.Setenv(SourcesEnv, src)
		t.Setenv(CacheEnv, t.TempDir())
		writeArchive(t, src, "v1.2.3", map[string]string{"gpu-operator-v1.2.3/go.mod": "module x\n"})
		if err := os.WriteFile(filepath.Join(src, "SHA256SUMS"), []byte(strings.Repeat("0", 64)+"  gpu-operator-v1.2.3.tar.gz\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Tree(context.Background(), "v1.2.3"); err == nil || !strings.Contains(err.Error(), "SHA256SUMS says") {
			t.Fatalf("err = %v, want a checksum mismatch", err)
		}
	})
	t.Run("a clone is used in place", func(t *testing.T) {
		src := t.TempDir()
		t.Setenv(SourcesEnv, src)
		clone := filepath.Join(src, "gpu-operator-v9.9.9")
		if err := os.MkdirAll(clone, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(clone, "go.mod"), []byte("module x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		dir, err := Tree(context.Background(), "v9.9.9")
		if err != nil || dir != clone {
			t.Fatalf("Tree = %s, %v; want %s", dir, err, clone)
		}
		// The cache key follows the commit the branch points at, loose or packed.
		git := filepath.Join(clone, ".git")
		for p, body := range map[string]string{"HEAD": "ref: refs/heads/main\n", "refs/heads/main": "aaaa\n", "packed-refs": "# pack-refs\nbbbb refs/heads/other\n"} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(git, p)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(git, p), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if k := Key("v9.9.9"); k != "clone-aaaa" {
			t.Errorf("Key = %q, want clone-aaaa", k)
		}
		if err := os.WriteFile(filepath.Join(git, "HEAD"), []byte("ref: refs/heads/other\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if k := Key("v9.9.9"); k != "clone-bbbb" {
			t.Errorf("Key after a checkout = %q, want clone-bbbb", k)
		}
	})
	t.Run("missing sources say how to get them", func(t *testing.T) {
		t.Setenv(SourcesEnv, t.TempDir())
		_, err := Tree(context.Background(), "v26.7.0")
		if !errors.Is(err, ErrNoSources) || !strings.Contains(err.Error(), "git clone --depth 1 --branch v26.7.0") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("an entry that leaves the directory is refused", func(t *testing.T) {
		src := t.TempDir()
		t.Setenv(SourcesEnv, src)
		t.Setenv(CacheEnv, t.TempDir())
		writeArchive(t, src, "v1.0.0", map[string]string{"gpu-operator-v1.0.0/go.mod": "m", "../evil": "x"})
		if _, err := Tree(context.Background(), "v1.0.0"); err == nil || !strings.Contains(err.Error(), "leaves") {
			t.Fatalf("err = %v", err)
		}
	})
}
