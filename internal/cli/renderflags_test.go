package cli

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// installFlagsNotRendered are install's flags that change nothing an install renders (values, objects,
// node labels), each with why. Every other install flag must be a render flag: a new flag of install
// fails TestRenderersTakeInstallsRenderFlags until it is one or is named here.
var installFlagsNotRendered = map[string]string{
	"dry-run":          "prints the plan instead of running it",
	"output":           "the format of install's result",
	"interactive":      "runs the wizard",
	"skip-check":       "which preflight checks run before the first write",
	"force":            "skips preflight's gpu-work check",
	"timeout":          "how long the run may take",
	"wait-for-lock":    "how long to wait for another run's lock",
	"adopt":            "whether install may take over a release another tool installed: a render describes gpuctl's releases whoever applied them (plan.Options.Render)",
	"nls-token-file":   "secret material, read at install and never rendered: the values name the Secrets",
	"gridd-conf-file":  "secret material, read at install and never rendered",
	"ngc-api-key-file": "secret material, read at install and never rendered",
	"ngc-api-key-env":  "secret material, read at install and never rendered",
}

// renderers are the verbs that render an install's plan (check --pre judges it).
var renderers = []string{"template", "export", "images", "check"}

// TestRenderersTakeInstallsRenderFlags: every verb that renders an install's plan takes every render
// flag as install declares it (the one declaration in renderflags.go: the same type, default, shorthand
// and help, --profile's help aside, which says where the verb works offline), and every flag of install
// is either a render flag or named in installFlagsNotRendered with why.
func TestRenderersTakeInstallsRenderFlags(t *testing.T) {
	root := newRoot(context.Background(), Streams{}, &globals{kube: genericclioptions.NewConfigFlags(true)}, func(string) string { return "" })
	command := func(name string) *cobra.Command {
		c, _, err := root.Find([]string{name})
		if err != nil || c.Name() != name {
			t.Fatalf("no command %s: %v", name, err)
		}
		return c
	}
	install := command("install")
	render := renderFlagNames()

	t.Run("every install flag is a render flag or named as changing no render", func(t *testing.T) {
		install.LocalFlags().VisitAll(func(f *pflag.Flag) {
			_, notRendered := installFlagsNotRendered[f.Name]
			switch rendered := slices.Contains(render, f.Name); {
			case f.Name == "help":
			case rendered && notRendered:
				t.Errorf("--%s is a render flag and named as changing no render", f.Name)
			case !rendered && !notRendered:
				t.Errorf("install's --%s is not a render flag: add it to renderFlags (renderflags.go), or to installFlagsNotRendered with why it changes nothing rendered", f.Name)
			}
		})
		for name := range installFlagsNotRendered {
			if install.LocalFlags().Lookup(name) == nil {
				t.Errorf("installFlagsNotRendered names --%s, which install does not have", name)
			}
		}
	})

	for _, verb := range renderers {
		t.Run(verb+" takes every render flag as install declares it", func(t *testing.T) {
			c := command(verb)
			for _, name := range render {
				want, got := install.LocalFlags().Lookup(name), c.LocalFlags().Lookup(name)
				switch {
				case want == nil:
					t.Errorf("install has no render flag --%s", name)
				case got == nil:
					t.Errorf("%s has no --%s: register the render flags with addRenderFlags", verb, name)
				case got.Value.Type() != want.Value.Type() || got.DefValue != want.DefValue || got.Shorthand != want.Shorthand:
					t.Errorf("%s --%s is a %s defaulting to %q (-%s), install's a %s defaulting to %q (-%s)", verb, name,
						got.Value.Type(), got.DefValue, got.Shorthand, want.Value.Type(), want.DefValue, want.Shorthand)
				case name != "profile" && got.Usage != want.Usage:
					t.Errorf("%s --%s says %q, install's %q", verb, name, got.Usage, want.Usage)
				}
			}
		})
	}
}

// TestRenderFlagsRender: each new render flag changes what template and export write offline, and
// each assumption it needs the cluster for is said on stderr (a warning, or a note of what is not
// exported): no flag is taken and dropped without a word.
func TestRenderFlagsRender(t *testing.T) {
	for _, tc := range []struct {
		name   string
		flags  []string
		stdout string // in the render, not in the render without the flags
		stderr string
	}{
		{"--sharing for every GPU node renders the device plugin's config as the default", []string{"--sharing", "time-slicing=4"}, "time-slicing-4", ""},
		{"--sharing for a pool renders its config and names the label its nodes need", []string{"--sharing", "gpu-pool=mps=2"}, "mps-2", "pool gpu-pool nvidia.com/device-plugin.config=mps-2"},
		{"--mig renders the strategy and MIG manager and names the label", []string{"--mig", "mixed", "--mig", "all-balanced"}, "strategy: mixed", "nvidia.com/mig.config=all-balanced"},
		{"--dra renders the GPUCluster", []string{"--dra"}, "\nkind: GPUCluster\n", "--dra: rendered without a cluster"},
		{"--precompiled auto renders NVIDIADriver default", []string{"--precompiled", "auto"}, "\nkind: NVIDIADriver\n", "no GPU node's kernel is known"},
		{"--monitoring renders the gpu-monitoring release", []string{"--monitoring"}, "\nkind: PrometheusRule\n", "--monitoring: rendered without a cluster"},
	} {
		base := []string{"--profile", "kubeadm", "--kube-version", "1.35"}
		t.Run("template "+tc.name, func(t *testing.T) {
			_, plain, _ := run(t, nil, append([]string{"template"}, base...)...)
			code, out, errOut := run(t, nil, append(append([]string{"template"}, base...), tc.flags...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if !strings.Contains(out, tc.stdout) || strings.Contains(plain, tc.stdout) {
				t.Errorf("the render holds %q only with %v: %v", tc.stdout, tc.flags, strings.Contains(out, tc.stdout))
			}
			if !strings.Contains(errOut, tc.stderr) {
				t.Errorf("stderr does not say %q:\n%s", tc.stderr, errOut)
			}
		})
		t.Run("export "+tc.name, func(t *testing.T) {
			args := append([]string{"export", "--for", "flux", "--chart-repo", "oci://registry.example.com/gpuctl", "--profile", "kubeadm"}, tc.flags...)
			code, out, errOut := run(t, nil, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			_, plain, _ := run(t, nil, args[:len(args)-len(tc.flags)]...)
			if out == plain {
				t.Errorf("the export with %v is the export without them", tc.flags)
			}
			if !strings.Contains(errOut, tc.stderr) || (tc.stderr != "" && !strings.Contains(out, tc.stderr)) {
				t.Errorf("stderr and the export's notes do not say %q:\n%s", tc.stderr, errOut)
			}
		})
	}
}
