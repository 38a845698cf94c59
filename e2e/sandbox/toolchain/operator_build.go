package toolchain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuctl/gpuctl/e2e/upstream"
	"github.com/gpuctl/gpuctl/internal/bundle"
)

// OperatorBuild is one GPU operator controller the sandbox can run, with the files its image carries.
type OperatorBuild struct {
	// Release is the GPU Operator release ("v26.7.0"); for the fallback module, OperatorModuleVersion.
	Release string
	// FromSources: built from NVIDIA's unmodified sources of Release (e2e/upstream).
	FromSources bool
	// Binary is the controller (cmd/gpu-operator).
	Binary string
	// Root is laid out like /opt/gpu-operator in the release's image (docker/Dockerfile: assets/ at
	// the top, manifests/ below it), the state manifests the controller reads from that fixed path.
	// Root/.gpuctl-release names the build.
	Root string
	// CRDs is the release's config/crd/bases; BundleCRDs the CRD files of its OLM bundle
	// (bundle/manifests), empty for the fallback module; Samples its config/samples.
	CRDs, BundleCRDs, Samples string
}

// operatorRootDir is the cache entry's subdirectory that stands for /opt/gpu-operator.
const OperatorRootDir = "opt-gpu-operator"

// releaseMarker is the file in Root that names the build, so a test (or a person) can see which
// release's files a controller process has at /opt/gpu-operator.
const ReleaseMarker = ".gpuctl-release"

// operatorBuildRevision changes when the way a release is built or laid out changes, so that cache
// entries of an older layout are not reused.
const operatorBuildRevision = "1"

// Operator returns the controller to run for release ("v26.7.0"): the one built from NVIDIA's sources,
// else the fallback module with a warning that says how to get the sources. With
// GPUCTL_REQUIRE_GPU_OPERATOR_SOURCES set, missing sources are an error instead.
func (t *Tools) Operator(release string) (b OperatorBuild, warning string, err error) {
	if b, ok := t.Operators[release]; ok {
		return b, "", nil
	}
	if upstream.Required() {
		return OperatorBuild{}, "", fmt.Errorf("%w for %s, and %s is set; to get them: %s",
			upstream.ErrNoSources, release, upstream.RequireEnv, upstream.HowToGet(release))
	}
	if t.Fallback == nil {
		return OperatorBuild{}, "", fmt.Errorf("no GPU operator controller for %s: its sources are missing (%s) and the fallback module is not built",
			release, upstream.HowToGet(release))
	}
	return *t.Fallback, fmt.Sprintf("NVIDIA's sources of GPU Operator %s are missing: running the controller of the Go module %s (the v25.3.4 tag) instead, which is NOT the release installed; to run the real %s controller: %s",
		release, OperatorModuleVersion, release, upstream.HowToGet(release)), nil
}

// ensureOperators builds, once per cache, the controller of every release in gpuctl's catalog from
// NVIDIA's sources, and the fallback module's controller if any release's sources are missing. The
// caller holds the tool cache's lock.
func ensureOperators(ctx context.Context, t *Tools, src, goVersion string, progress io.Writer) error {
	t.Operators = map[string]OperatorBuild{}
	var missing []string
	for _, b := range bundle.List() {
		key := upstream.Key(b.Version)
		if key == "" {
			t.MissingSources = append(t.MissingSources, b.Version)
			missing = append(missing, "  "+upstream.HowToGet(b.Version))
			continue
		}
		h := sha256.New()
		fmt.Fprintln(h, key, goVersion, operatorBuildRevision)
		dest := filepath.Join(t.Dir, "gpu-operator-"+b.Version+"-"+hex.EncodeToString(h.Sum(nil))[:12])
		if _, err := os.Stat(filepath.Join(dest, ".complete")); err != nil {
			if err := buildOperatorFromSources(ctx, b.Version, dest, progress); err != nil {
				return err
			}
		}
		t.Operators[b.Version] = operatorBuildAt(dest, b.Version, true)
	}
	if len(missing) == 0 {
		return nil
	}
	if upstream.Required() {
		return fmt.Errorf("%w for %s, and %s is set; to get them:\n%s", upstream.ErrNoSources,
			strings.Join(t.MissingSources, ", "), upstream.RequireEnv, strings.Join(missing, "\n"))
	}
	fmt.Fprintf(progress, "sandbox: WARNING: NVIDIA's GPU Operator sources of %s are missing; for those releases the sandbox runs the controller of the Go module %s (v25.3.4), not the release installed. To get them:\n%s\n",
		strings.Join(t.MissingSources, ", "), OperatorModuleVersion, strings.Join(missing, "\n"))
	m := fallbackOperatorModule()
	key, err := m.cacheKey(src, goVersion)
	if err != nil {
		return err
	}
	dest := filepath.Join(t.Dir, m.name+"-"+m.version+"-"+key)
	if _, err := os.Stat(filepath.Join(dest, ".complete")); err != nil {
		if err := m.build(ctx, src, dest, progress); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dest, OperatorRootDir, ReleaseMarker), []byte(OperatorModuleVersion+" module\n"), 0o644); err != nil {
			return err
		}
	}
	fb := operatorBuildAt(dest, OperatorModuleVersion, false)
	t.Fallback = &fb
	return nil
}

func operatorBuildAt(dir, release string, fromSources bool) OperatorBuild {
	b := OperatorBuild{
		Release:     release,
		FromSources: fromSources,
		Binary:      filepath.Join(dir, "gpu-operator"),
		Root:        filepath.Join(dir, OperatorRootDir),
		CRDs:        filepath.Join(dir, "crds"),
		Samples:     filepath.Join(dir, "samples"),
	}
	if fromSources {
		b.BundleCRDs = filepath.Join(dir, "bundle-crds")
	}
	return b
}

// buildOperatorFromSources builds cmd/gpu-operator of release tag from NVIDIA's source tree with its
// vendor/ directory (no network), stamped with the release as NVIDIA's Makefile does
// (VERSION_PKG in Makefile at v26.7.0), and copies what the image carries and the tests read.
func buildOperatorFromSources(ctx context.Context, tag, dest string, progress io.Writer) error {
	tree, err := upstream.Tree(ctx, tag)
	if err != nil {
		return err
	}
	tmp, err := emptyEntry(dest)
	if err != nil {
		return err
	}
	start := time.Now()
	what := "the GPU operator controller " + tag
	fmt.Fprintf(progress, "sandbox: building %s from NVIDIA's sources (first run only; about 3–4 minutes on 2 cores)…\n", what)
	// -trimpath keeps the trees' directories out of the build cache's keys, so vendored packages the
	// releases share are compiled once.
	args := []string{"build", "-v", "-trimpath", "-mod=vendor", "-o", filepath.Join(tmp, "gpu-operator"),
		"-ldflags", "-X github.com/NVIDIA/gpu-operator/internal/info.version=" + tag, "./cmd/gpu-operator"}
	// GOTOOLCHAIN=local: the release's go.mod names its own Go version, which must not be downloaded.
	env := []string{"GOWORK=off", "GOFLAGS=-mod=vendor", "GOTOOLCHAIN=local"}
	if err := goBuild(ctx, tree, env, args, what, progress); err != nil {
		return fmt.Errorf("build %s in %s: %w", what, tree, err)
	}
	// The image copies assets/ to /opt/gpu-operator/ and manifests/ to /opt/gpu-operator/manifests
	// (docker/Dockerfile at v26.7.0).
	for from, to := range map[string]string{
		"assets":           OperatorRootDir,
		"manifests":        filepath.Join(OperatorRootDir, "manifests"),
		"config/crd/bases": "crds",
		"config/samples":   "samples",
	} {
		if err := CopyTree(filepath.Join(tree, from), filepath.Join(tmp, to)); err != nil {
			return fmt.Errorf("copy %s of %s: %w", from, tag, err)
		}
	}
	if err := copyBundleCRDs(filepath.Join(tree, "bundle", "manifests"), filepath.Join(tmp, "bundle-crds")); err != nil {
		return fmt.Errorf("copy the bundle CRDs of %s: %w", tag, err)
	}
	marker := fmt.Sprintf("%s sources %s\n", tag, upstream.Key(tag))
	if err := os.WriteFile(filepath.Join(tmp, OperatorRootDir, ReleaseMarker), []byte(marker), 0o644); err != nil {
		return err
	}
	if err := completeEntry(tmp, dest); err != nil {
		return err
	}
	fmt.Fprintf(progress, "sandbox: built %s in %s\n", what, time.Since(start).Round(time.Second))
	return nil
}

// copyBundleCRDs copies the CustomResourceDefinition files of an OLM bundle's manifests/ directory
// (the CSV and other kinds stay behind). A release without a bundle directory has none.
func copyBundleCRDs(from, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(from, "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "\nkind: CustomResourceDefinition") {
			continue
		}
		if err := os.WriteFile(filepath.Join(to, filepath.Base(f)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
