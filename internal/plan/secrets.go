package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuctl/gpuctl/internal/detect"
)

// Secrets gpuctl creates for NVIDIA AI Enterprise (vGPU guest drivers, TKGS/VKS; NVIDIA's "GPU
// Operator with NVIDIA AI Enterprise" guide, https://docs.nvidia.com/ai-enterprise/deployment/vmware/latest/gpu-operator.html):
// the NLS licensing Secret the driver reads and the pull secret for NVIDIA's NVAIE registry. gpuctl
// manages them, when the values refer to them, under exactly the names detection finds them by
// (detect.LicensingSecret, detect.NGCPullSecret); what else it needs to know of them is here.
const (
	// NGCRegistry is the registry the NVAIE driver images come from (the guide above).
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
	// KeepIfUnset: the Secret exists and its source is an environment variable; when the variable is
	// not set, the engine keeps the existing Secret instead of failing.
	KeepIfUnset bool `json:"keepIfUnset,omitempty"`
}

// ErrMissingLicense means the values need NVAIE licensing inputs that were not given.
var ErrMissingLicense = errors.New("missing NVIDIA AI Enterprise licensing inputs")

// licensingStep decides, from the operator values, which NVAIE secrets are needed, and checks the
// inputs are named. A needed Secret that already exists in the namespace (a re-run) is reused when no
// input for it is given; given inputs replace it. It does not read the inputs (Build is pure); the
// engine does, before it changes anything. The notes are plan warnings: the Secrets reused, and
// licensing inputs given where the values use no NVAIE Secret.
func licensingStep(values map[string]any, ns string, lic Licensing, existing detect.Existing) (Step, []string, error) {
	step := Step{ID: "licensing", Kind: KindSecrets, Title: "NVIDIA AI Enterprise secrets",
		Why: "the vGPU guest driver needs its NLS license and pulls from NVIDIA's NVAIE registry"}
	var need secretNeeds
	if name, _ := at(values, "driver", "licensingConfig", "secretName").(string); name == detect.LicensingSecret {
		need.licensingSecret(&step, ns, lic, existing)
	}
	if pullSecrets, _ := at(values, "driver", "imagePullSecrets").([]any); slices.ContainsFunc(pullSecrets, func(e any) bool { return namesSecret(e, detect.NGCPullSecret) }) {
		need.pullSecret(&step, ns, lic, existing)
	}
	if !need.needed {
		step.Skip = "the values use no NVIDIA AI Enterprise secrets"
		var notes []string
		if given := lic.given(); len(given) > 0 {
			notes = append(notes, strings.Join(given, ", ")+": not used, "+step.Skip+" (driver.licensingConfig.secretName, driver.imagePullSecrets)")
		}
		return step, notes, nil
	}
	if len(need.missing) > 0 {
		return step, nil, fmt.Errorf("%w: the values use the %s driver from %s, which needs %s", ErrMissingLicense,
			"vGPU guest", NGCRegistry, strings.Join(need.missing, ", "))
	}
	if len(need.reused) == 0 {
		return step, nil, nil
	}
	note := fmt.Sprintf("reusing the existing Secret%s %s in %s (no new licensing inputs given; give them to replace %s)",
		pluralS(len(need.reused)), strings.Join(need.reused, " and "), ns, map[bool]string{true: "them", false: "it"}[len(need.reused) > 1])
	if len(step.Secrets) == 0 {
		step.Skip = note
	} else {
		step.Why += "; " + note
	}
	return step, []string{note}, nil
}

// secretNeeds is what the values' NVIDIA AI Enterprise secrets need: whether any is used, the
// inputs missing for them, and the existing Secrets reused.
type secretNeeds struct {
	needed          bool
	missing, reused []string
}

// licensingSecret plans the NLS licensing Secret: reused when it exists and no new input is given,
// otherwise written from the token and gridd.conf files (each missing one named).
func (n *secretNeeds) licensingSecret(step *Step, ns string, lic Licensing, existing detect.Existing) {
	n.needed = true
	if lic.NLSTokenFile == "" && lic.GriddConfFile == "" && existing.HasSecret(ns, detect.LicensingSecret) {
		n.reused = append(n.reused, detect.LicensingSecret)
		return
	}
	if lic.NLSTokenFile == "" {
		n.missing = append(n.missing, "the NLS client token (--nls-token-file)")
	}
	if lic.GriddConfFile == "" {
		n.missing = append(n.missing, "gridd.conf (--gridd-conf-file; an empty file is valid)")
	}
	step.Secrets = append(step.Secrets, SecretSpec{Name: detect.LicensingSecret, Namespace: ns, Type: "Opaque",
		Keys: []string{NLSTokenKey, GriddConfKey}, Files: []string{lic.NLSTokenFile, lic.GriddConfFile}})
}

// pullSecret plans the NGC pull Secret: from the key's file or environment variable, or reused when
// it exists and no key file is given.
func (n *secretNeeds) pullSecret(step *Step, ns string, lic Licensing, existing detect.Existing) {
	n.needed = true
	src := ngcKeySource(lic)
	keepIfUnset := false
	switch {
	case lic.NGCAPIKeyFile == "" && existing.HasSecret(ns, detect.NGCPullSecret):
		// Whether the key's environment variable is set is not the plan's to know (Build is pure): the
		// engine replaces the Secret when it is, and keeps it otherwise.
		keepIfUnset = true
		if lic.NGCAPIKeyEnv == "" {
			src = ""
			n.reused = append(n.reused, detect.NGCPullSecret)
		} else {
			n.reused = append(n.reused, detect.NGCPullSecret+" (unless "+lic.NGCAPIKeyEnv+" is set)")
		}
	case src == "":
		n.missing = append(n.missing, "the NGC API key (--ngc-api-key-file FILE or -, or the environment variable --ngc-api-key-env names; never a flag value)")
	}
	if src != "" {
		step.Secrets = append(step.Secrets, SecretSpec{Name: detect.NGCPullSecret, Namespace: ns, Type: "kubernetes.io/dockerconfigjson",
			Keys: []string{".dockerconfigjson"}, Files: []string{src}, Server: NGCRegistry, KeepIfUnset: keepIfUnset})
	}
}

// given lists the licensing flags that name an input.
func (l Licensing) given() []string {
	var out []string
	for _, f := range []struct{ flag, v string }{
		{"--nls-token-file", l.NLSTokenFile}, {"--gridd-conf-file", l.GriddConfFile}, {"--ngc-api-key-file", l.NGCAPIKeyFile},
	} {
		if f.v != "" {
			out = append(out, f.flag)
		}
	}
	return out
}

// pluralS is the "s" of a plural noun: "" when n is 1.
func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
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

// namesSecret reports whether an imagePullSecrets entry, a name or {name: ...}, names the Secret name.
func namesSecret(entry any, name string) bool {
	if m, ok := entry.(map[string]any); ok {
		return m["name"] == name
	}
	return entry == name
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
