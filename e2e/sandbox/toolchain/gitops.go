package toolchain

import (
	"context"
	"io"
	"path/filepath"
)

// Versions of the GitOps programs the sandbox runs on request (Options.GitOps, Options.Registry), pinned
// by e2e/tools/flux/go.mod and e2e/tools/registry/go.mod.
const (
	// FluxSourceControllerVersion and FluxHelmControllerVersion are Flux's controllers: versions whose
	// api submodules the Go module proxy serves at the same tag (later patch releases' are not). One
	// module builds both, so they share the compiled Kubernetes and Helm packages.
	FluxSourceControllerVersion = "v1.8.0"
	FluxHelmControllerVersion   = "v1.4.0"
	// RegistryVersion is the CNCF distribution registry (github.com/distribution/distribution/v3).
	RegistryVersion = "v3.1.2"
)

// Flux are Flux's controllers in the tool cache.
type Flux struct {
	// SourceController and HelmController are absolute paths of the executables.
	SourceController, HelmController string
	// CRDs are the directories of their CustomResourceDefinitions (each module's config/crd/bases).
	CRDs []string
}

func fluxModule() toolModule {
	return toolModule{
		name: "flux", subdir: "flux", version: "source-" + FluxSourceControllerVersion + "-helm-" + FluxHelmControllerVersion,
		packages: []string{"github.com/fluxcd/source-controller", "github.com/fluxcd/helm-controller"},
		data: map[string]map[string]string{
			"github.com/fluxcd/source-controller": {"config/crd/bases": "crds/source-controller"},
			"github.com/fluxcd/helm-controller":   {"config/crd/bases": "crds/helm-controller"},
		},
		expect: "about 6 minutes",
	}
}

func registryModule() toolModule {
	return toolModule{
		name: "registry", subdir: "registry", version: RegistryVersion,
		packages: []string{"github.com/distribution/distribution/v3/cmd/registry"},
		expect:   "about 2 minutes",
	}
}

// EnsureFlux builds Flux's source-controller and helm-controller once per cache (e2e/tools/flux) and
// returns where they are. Like EnsureTools it waits on the cache's lock; `sandbox tools` builds them
// ahead of the tests, and a sandbox asks for them only when it runs Flux.
func EnsureFlux(ctx context.Context, cacheDir string, progress io.Writer) (*Flux, error) {
	dir, err := ensureModule(ctx, cacheDir, progress, fluxModule())
	if err != nil {
		return nil, err
	}
	return &Flux{
		SourceController: filepath.Join(dir, "source-controller"),
		HelmController:   filepath.Join(dir, "helm-controller"),
		CRDs:             []string{filepath.Join(dir, "crds", "source-controller"), filepath.Join(dir, "crds", "helm-controller")},
	}, nil
}

// EnsureRegistry builds the distribution registry once per cache (e2e/tools/registry) and returns the
// executable's path.
func EnsureRegistry(ctx context.Context, cacheDir string, progress io.Writer) (string, error) {
	dir, err := ensureModule(ctx, cacheDir, progress, registryModule())
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "registry"), nil
}

// ensureModule builds one tool module into the cache unless it is there, under the cache's lock.
func ensureModule(ctx context.Context, cacheDir string, progress io.Writer, m toolModule) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	cacheDir, src, goVersion, unlock, err := openCache(ctx, cacheDir, progress)
	if err != nil {
		return "", err
	}
	defer unlock()
	return m.ensure(ctx, src, cacheDir, goVersion, progress)
}
