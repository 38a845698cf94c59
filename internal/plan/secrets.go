package plan

import (
	"errors"
	"fmt"
	"strings"
)

// Secrets gpuctl creates for NVIDIA AI Enterprise (vGPU guest drivers, TKGS/VKS; research §5 TKGS):
// the NLS licensing Secret the driver reads, and the pull secret for NVIDIA's NVAIE registry. gpuctl
// manages them under exactly these names, when the values refer to them.
const (
	LicensingSecret = "licensing-config"
	NGCPullSecret   = "ngc-secret"
	// NGCRegistry is the registry the NVAIE driver images come from (research §5 TKGS).
	NGCRegistry = "nvcr.io/nvaie"
	// NLSTokenKey and GriddConfKey are the file names the vGPU guest driver expects in the Secret.
	NLSTokenKey  = "client_configuration_token.tok"
	GriddConfKey = "gridd.conf"
)

// Licensing names where the NVAIE secret material comes from. It holds paths and names only: the
// material itself is read by the engine when it creates the Secrets, and never enters the Plan, Helm
// values or release history, or any output.
type Licensing struct {
	// NLSTokenFile is the NLS client configuration token file; GriddConfFile the gridd.conf file
	// (may be empty-content but must exist).
	NLSTokenFile, GriddConfFile string
	// NGCAPIKeyFile is a file holding the NGC API key ("-" = standard input); NGCAPIKeyEnv the name of
	// an environment variable holding it. The file wins when both are set.
	NGCAPIKeyFile, NGCAPIKeyEnv string
}

// SecretSpec is a Secret the engine creates from local inputs. Sources describe the inputs for people
// ("file ./token.tok"); Keys are the Secret's data keys, in order, matching Sources.
type SecretSpec struct {
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	Type      string   `json:"type"`
	Keys      []string `json:"keys"`
	// Files are the local files whose contents become Keys (same order); for a registry secret there is
	// one entry, the NGC key's source.
	Files []string `json:"files"`
	// Server is the registry of a kubernetes.io/dockerconfigjson secret.
	Server string `json:"server,omitempty"`
}

// ErrMissingLicense means the values need NVAIE licensing inputs that were not given.
var ErrMissingLicense = errors.New("missing NVIDIA AI Enterprise licensing inputs")

// secretsStep decides, from the operator values, which NVAIE secrets are needed, and checks the inputs
// are named. It does not read them (Build is pure); the engine does, before it changes anything.
func secretsStep(values map[string]any, ns string, lic Licensing) (Step, error) {
	step := Step{ID: "licensing", Kind: KindSecrets, Title: "NVIDIA AI Enterprise secrets",
		Why: "the vGPU guest driver needs its NLS license and pulls from NVIDIA's NVAIE registry"}
	var missing []string
	if name, _ := at(values, "driver", "licensingConfig", "secretName").(string); name == LicensingSecret {
		if lic.NLSTokenFile == "" {
			missing = append(missing, "the NLS client token (--nls-token-file)")
		}
		if lic.GriddConfFile == "" {
			missing = append(missing, "gridd.conf (--gridd-conf-file; an empty file is valid)")
		}
		step.Secrets = append(step.Secrets, SecretSpec{Name: LicensingSecret, Namespace: ns, Type: "Opaque",
			Keys: []string{NLSTokenKey, GriddConfKey}, Files: []string{lic.NLSTokenFile, lic.GriddConfFile}})
	}
	if pullSecrets, _ := at(values, "driver", "imagePullSecrets").([]any); containsString(pullSecrets, NGCPullSecret) {
		src := ngcKeySource(lic)
		if src == "" {
			missing = append(missing, "the NGC API key (--ngc-api-key-file FILE or -, or the environment variable --ngc-api-key-env names; never a flag value)")
		}
		step.Secrets = append(step.Secrets, SecretSpec{Name: NGCPullSecret, Namespace: ns, Type: "kubernetes.io/dockerconfigjson",
			Keys: []string{".dockerconfigjson"}, Files: []string{src}, Server: NGCRegistry})
	}
	if len(step.Secrets) == 0 {
		step.Skip = "the values use no NVIDIA AI Enterprise secrets"
		return step, nil
	}
	if len(missing) > 0 {
		return step, fmt.Errorf("%w: the values use the %s driver from %s, which needs %s", ErrMissingLicense,
			"vGPU guest", NGCRegistry, strings.Join(missing, ", "))
	}
	return step, nil
}

// ngcKeySource describes where the NGC key comes from: "file PATH", "stdin" or "env NAME".
func ngcKeySource(lic Licensing) string {
	switch {
	case lic.NGCAPIKeyFile == "-":
		return "stdin"
	case lic.NGCAPIKeyFile != "":
		return "file " + lic.NGCAPIKeyFile
	case lic.NGCAPIKeyEnv != "":
		return "env " + lic.NGCAPIKeyEnv
	}
	return ""
}

func containsString(list []any, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
		if m, ok := x.(map[string]any); ok && m["name"] == s {
			return true
		}
	}
	return false
}

func at(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}
