package toolchain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The GitOps engines' modules whose own CRDs gpuctl's exports are validated against, at pinned
// versions, in one place. Argo CD v3.6 needs a newer Go than gpuctl's; v3.5.7 is the newest it builds
// with. Cluster API's Helm add-on provider (sigs.k8s.io/cluster-api-addon-provider-helm) is not served
// as a module, so its HelmChartProxy is not exported (docs/gitops.md#cluster-api).
const (
	ArgoCDModule            = "github.com/argoproj/argo-cd/v3@v3.5.7"
	K3sHelmControllerModule = "github.com/k3s-io/helm-controller@v0.17.9"
	// Flux's are the controllers the sandbox runs (gitops.go), so the CRDs exports are validated
	// against are those Flux reconciles.
	FluxHelmControllerModule   = "github.com/fluxcd/helm-controller@" + FluxHelmControllerVersion
	FluxSourceControllerModule = "github.com/fluxcd/source-controller@" + FluxSourceControllerVersion
)

// An EngineCRDSource is where in an engine's module its CRDs are: the module at its version and the
// glob of the CRD files in it.
type EngineCRDSource struct {
	Module string
	Glob   string
}

// EngineCRDSources are the CRDs of every engine gpuctl exports for, by engine ("argocd", "rke2",
// "flux").
func EngineCRDSources() map[string][]EngineCRDSource {
	return map[string][]EngineCRDSource{
		"argocd": {{ArgoCDModule, "manifests/crds/*-crd.yaml"}},
		"rke2":   {{K3sHelmControllerModule, "pkg/crds/yaml/generated/*.yaml"}},
		"flux": {
			{FluxSourceControllerModule, "config/crd/bases/*.yaml"},
			{FluxHelmControllerModule, "config/crd/bases/*.yaml"},
		},
	}
}

// EngineCRDFiles downloads the modules of src with `go mod download` (the Go command checks their
// sums; the module cache is the only cache) and returns the CRD files they hold, sorted, as bytes by
// path within the module cache.
func EngineCRDFiles(ctx context.Context, src []EngineCRDSource) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, s := range src {
		dir, err := downloadModule(ctx, s.Module)
		if err != nil {
			return nil, err
		}
		files, err := filepath.Glob(filepath.Join(dir, s.Glob))
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s holds no %s", s.Module, s.Glob)
		}
		slices.Sort(files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			out[f] = b
		}
	}
	return out, nil
}

// downloadModule runs `go mod download -json MODULE@VERSION` outside any module and returns the
// module's directory in the module cache.
func downloadModule(ctx context.Context, module string) (string, error) {
	tmp, err := os.MkdirTemp("", "gpuctl-engine-crds-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	cmd.Dir = tmp
	// GOTOOLCHAIN=local: a module whose go.mod asks for a newer Go must not make the Go command fetch
	// a toolchain; downloading a module's source needs none.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	var m struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &m); jerr == nil && m.Error != "" {
		return "", fmt.Errorf("go mod download %s: %s", module, m.Error)
	}
	if err != nil {
		var stderr string
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = strings.TrimSpace(string(ee.Stderr))
		}
		return "", fmt.Errorf("go mod download %s: %w: %s", module, err, stderr)
	}
	if m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no directory in %q", module, out)
	}
	return m.Dir, nil
}
