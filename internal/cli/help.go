package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// kubeFlags adds kubectl's connection flags (--kubeconfig, --context, -n, --as, …) to root as
// persistent flags and returns their names. Every command takes them, but help lists them in one
// place, `gpuctl options`, as kubectl does (`kubectl options`), so a command's own flags come first.
func kubeFlags(root *cobra.Command, g *globals) map[string]bool {
	fs := pflag.NewFlagSet("kubernetes", pflag.ContinueOnError)
	g.kube.AddFlags(fs)
	names := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
	root.PersistentFlags().AddFlagSet(fs)
	return names
}

// without is the flags of fs except the named ones.
func without(fs *pflag.FlagSet, names map[string]bool) *pflag.FlagSet {
	out := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.VisitAll(func(f *pflag.Flag) {
		if !names[f.Name] && !f.Hidden {
			out.AddFlag(f)
		}
	})
	return out
}

// only is the named flags of fs.
func only(fs *pflag.FlagSet, names map[string]bool) *pflag.FlagSet {
	out := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.VisitAll(func(f *pflag.Flag) {
		if names[f.Name] {
			out.AddFlag(f)
		}
	})
	return out
}

// usageFunc writes a command's usage as kubectl does: usage line, aliases, examples, subcommands,
// the command's own flags, gpuctl's few global ones, and where the connection flags are.
func usageFunc(kube map[string]bool) func(*cobra.Command) error {
	return func(c *cobra.Command) error {
		w := c.OutOrStderr()
		var b strings.Builder
		fmt.Fprintf(&b, "Usage:\n")
		if c.Runnable() {
			fmt.Fprintf(&b, "  %s\n", c.UseLine())
		}
		if c.HasAvailableSubCommands() {
			fmt.Fprintf(&b, "  %s [command]\n", c.CommandPath())
		}
		if len(c.Aliases) > 0 {
			fmt.Fprintf(&b, "\nAliases:\n  %s\n", c.NameAndAliases())
		}
		if c.HasExample() {
			fmt.Fprintf(&b, "\nExamples:\n%s\n", c.Example)
		}
		if c.HasAvailableSubCommands() {
			fmt.Fprintf(&b, "\nAvailable Commands:\n")
			width := 0
			for _, s := range c.Commands() {
				if s.IsAvailableCommand() || s.Name() == "help" {
					width = max(width, len(s.Name()))
				}
			}
			for _, s := range c.Commands() {
				if s.IsAvailableCommand() || s.Name() == "help" {
					fmt.Fprintf(&b, "  %-*s  %s\n", width, s.Name(), s.Short)
				}
			}
		}
		if own := without(c.LocalFlags(), kube); own.HasAvailableFlags() {
			fmt.Fprintf(&b, "\nFlags:\n%s", own.FlagUsages())
		}
		if global := without(c.InheritedFlags(), kube); global.HasAvailableFlags() {
			fmt.Fprintf(&b, "\nGlobal Flags:\n%s", global.FlagUsages())
		}
		root := c.Root().CommandPath()
		b.WriteString("\n")
		if c.HasAvailableSubCommands() {
			fmt.Fprintf(&b, "Use \"%s [command] --help\" for more information about a command.\n", c.CommandPath())
		}
		fmt.Fprintf(&b, "Use \"%s options\" for the Kubernetes connection flags every command takes (--kubeconfig, --context, -n, --as, …).\n", root)
		_, err := io.WriteString(w, b.String())
		return err
	}
}

func newOptionsCmd(streams Streams, kube map[string]bool) *cobra.Command {
	return &cobra.Command{
		Use:   "options",
		Short: "Print the Kubernetes connection flags every command takes",
		Long:  "The Kubernetes connection flags, as kubectl's: every command takes them. GPUCTL_<FLAG> variables and the config file set them too.",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintln(streams.Out, "The following options can be passed to any command:")
			fmt.Fprintln(streams.Out)
			_, err := io.WriteString(streams.Out, only(c.InheritedFlags(), kube).FlagUsages())
			return err
		},
	}
}
