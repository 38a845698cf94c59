package wizard

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// ConfigVersion is the version field of the config file the wizard saves. gpuctl's config file holds
// flag values under the flags' names (internal/cli applySettings); version says which format it is.
const ConfigVersion = 1

// ConfigFile renders the options as a config file `gpuctl install --config FILE` replays: each key
// is an install flag's name. Secrets appear only as the file or environment variable they come from.
// The kube context is not saved: CI brings its own kubeconfig.
func ConfigFile(o engine.InstallOptions, namespace, kubeContext string) ([]byte, error) {
	b, err := yaml.Marshal(configSettings(o, namespace))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "# Written by gpuctl wizard. Replay with: gpuctl install --config FILE\n")
	fmt.Fprintf(&out, "# Keys are gpuctl install's flags; flags and GPUCTL_* variables win over them.\n")
	if kubeContext != "" {
		fmt.Fprintf(&out, "# Chosen against kube context %q (not saved: the kubeconfig in use decides).\n", kubeContext)
	}
	if o.Licensing.NGCAPIKeyFile == "" && (o.Licensing.NLSTokenFile != "" || o.Licensing.GriddConfFile != "") {
		env := o.Licensing.NGCAPIKeyEnv
		if env == "" {
			env = ngcKeyEnv
		}
		fmt.Fprintf(&out, "# The NGC API key is read from $%s; it is never saved here.\n", env)
	}
	out.Write(b)
	return out.Bytes(), nil
}

// configSettings are the config file's keys and values: the version, and each install flag the
// options set away from its default, under the flag's name.
func configSettings(o engine.InstallOptions, namespace string) map[string]any {
	m := map[string]any{"version": ConfigVersion}
	put := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	put("profile", o.Profile)
	put("operator-version", o.OperatorVersion)
	put("channel", o.Channel)
	flag := func(k string, v bool) {
		if v {
			m[k] = true
		}
	}
	list := func(k string, v []string) {
		if len(v) > 0 {
			m[k] = v
		}
	}
	flag("no-taint", o.NoTaint)
	flag("taint", o.Taint)
	flag("tolerate-existing-taints", o.TolerateExistingTaints)
	list("values", o.ValuesFiles)
	list("set", o.Set)
	flag("monitoring", o.Monitoring)
	list("sharing", o.Sharing)
	list("mig", o.MIG)
	flag("dra", o.DRA)
	put("precompiled", o.Precompiled)
	list("skip-check", o.SkipChecks)
	put("nls-token-file", o.Licensing.NLSTokenFile)
	put("gridd-conf-file", o.Licensing.GriddConfFile)
	put("ngc-api-key-file", o.Licensing.NGCAPIKeyFile)
	if o.Licensing.NGCAPIKeyEnv != "" && o.Licensing.NGCAPIKeyEnv != ngcKeyEnv {
		m["ngc-api-key-env"] = o.Licensing.NGCAPIKeyEnv
	}
	if namespace != "" && namespace != plan.DefaultNamespace {
		m["namespace"] = namespace
	}
	if o.Timeout > 0 && o.Timeout != plan.DefaultTimeout {
		m["timeout"] = o.Timeout.String()
	}
	return m
}

// SaveConfig writes ConfigFile to path, readable by its owner only (it names secret files).
func SaveConfig(path string, o engine.InstallOptions, namespace, kubeContext string) error {
	b, err := ConfigFile(o, namespace, kubeContext)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	return nil
}

// Command is the `gpuctl install` command line that does what the options say, without the wizard.
func Command(o engine.InstallOptions, namespace, kubeContext string) string {
	args := []string{"gpuctl", "install"}
	add := func(flag, v string) {
		if v != "" {
			args = append(args, flag, quote(v))
		}
	}
	add("--context", kubeContext)
	if namespace != "" && namespace != plan.DefaultNamespace {
		add("-n", namespace)
	}
	add("--profile", o.Profile)
	add("--operator-version", o.OperatorVersion)
	add("--channel", o.Channel)
	if o.NoTaint {
		args = append(args, "--no-taint")
	}
	if o.Taint {
		args = append(args, "--taint")
	}
	if o.Timeout > 0 && o.Timeout != plan.DefaultTimeout {
		add("--timeout", o.Timeout.String())
	}
	if o.TolerateExistingTaints {
		args = append(args, "--tolerate-existing-taints")
	}
	for _, f := range o.ValuesFiles {
		add("-f", f)
	}
	for _, s := range o.Set {
		add("--set", s)
	}
	for _, s := range o.SkipChecks {
		add("--skip-check", s)
	}
	add("--nls-token-file", o.Licensing.NLSTokenFile)
	add("--gridd-conf-file", o.Licensing.GriddConfFile)
	add("--ngc-api-key-file", o.Licensing.NGCAPIKeyFile)
	if o.Licensing.NGCAPIKeyEnv != "" && o.Licensing.NGCAPIKeyEnv != ngcKeyEnv {
		add("--ngc-api-key-env", o.Licensing.NGCAPIKeyEnv)
	}
	return strings.Join(args, " ")
}

// quote makes v one shell word.
func quote(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}
