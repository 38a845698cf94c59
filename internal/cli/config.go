package cli

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// checkConfigKeys refuses a config file key that is no flag of any gpuctl command: a typo must not
// pass silently. One file serves every command, so a key need only be some command's flag.
func checkConfigKeys(root *cobra.Command, v *viper.Viper, file string) error {
	known := map[string]bool{"version": true}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { known[f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { known[f.Name] = true })
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	var unknown []string
	for _, k := range v.AllKeys() {
		if top, _, _ := strings.Cut(k, "."); !known[top] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return usageError{fmt.Errorf("config file %s: unknown key %s: keys are the long names of gpuctl's flags (gpuctl config view lists them)", file, strings.Join(unknown, ", "))}
}

// secretFlags are connection flags whose values are credentials: config view never prints them.
var secretFlags = map[string]bool{"token": true, "password": true}

// connectionShown are the connection flags config view lists; the rest are in gpuctl options.
var connectionShown = []string{"kubeconfig", "context", "namespace", "as"}

// setting is one effective setting and where it came from.
type setting struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source string `json:"source"`
}

// Settings is what gpuctl config view prints: the effective settings of a command.
type Settings struct {
	Command    string    `json:"command"`
	ConfigFile string    `json:"configFile,omitempty"`
	Settings   []setting `json:"settings"`
}

func newConfigCmd(streams Streams, g *globals, getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show gpuctl's effective settings and where each comes from",
	}
	var output string
	view := &cobra.Command{
		Use:   "view [COMMAND]",
		Short: "Print each setting of a command (default install): its value and whether it came from a flag, GPUCTL_*, the config file or the default",
		Example: `  gpuctl config view                       # install's settings
  GPUCTL_TIMEOUT=45m gpuctl --config ci.yaml config view install -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := outputFlag(output, "text", "json", "yaml"); err != nil {
				return err
			}
			res, err := viewSettings(c, args, g.config, getenv)
			if err != nil {
				return err
			}
			return writeSettings(streams.Out, output, res)
		},
	}
	view.Flags().StringVarP(&output, "output", "o", "text", "text, json or yaml")
	cmd.AddCommand(view)
	return cmd
}

// viewSettings are the settings the command args name (default install) would run with: its flags
// filled from GPUCTL_* and the config file exactly as when it runs, each with where it came from.
// Connection flags are left out but for the few config view shows.
func viewSettings(c *cobra.Command, args []string, configFile string, getenv func(string) string) (*Settings, error) {
	name := "install"
	if len(args) == 1 {
		name = args[0]
	}
	target, _, err := c.Root().Find(strings.Fields(name))
	if err != nil || target == c.Root() || target.Name() != name {
		return nil, usageError{fmt.Errorf("config view: no command %q", name)}
	}
	// The global flags were parsed with this command's line.
	sources := map[string]string{}
	if err := applySettingsFrom(target, configFile, getenv, sources); err != nil {
		return nil, err
	}
	res := &Settings{Command: target.CommandPath(), ConfigFile: configFileIn(sources)}
	add := func(f *pflag.Flag) { res.Settings = append(res.Settings, settingOf(f, sources[f.Name])) }
	target.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && !connection(c.Root(), f.Name) {
			add(f)
		}
	})
	target.InheritedFlags().VisitAll(func(f *pflag.Flag) {
		if !connection(c.Root(), f.Name) || slices.Contains(connectionShown, f.Name) {
			add(f)
		}
	})
	return res, nil
}

// settingOf is a flag's setting: its value (hidden for credentials) and its source, the one
// applySettingsFrom recorded or else "flag" or "default".
func settingOf(f *pflag.Flag, source string) setting {
	switch {
	case source != "":
	case f.Changed:
		source = "flag"
	default:
		source = "default"
	}
	value := f.Value.String()
	if secretFlags[f.Name] && value != "" {
		value = "(hidden)"
	}
	return setting{Name: f.Name, Value: value, Source: source}
}

// writeSettings writes the settings as -o asks: a table as text.
func writeSettings(w io.Writer, output string, res *Settings) error {
	switch output {
	case "json":
		return writeJSON(w, res)
	case "yaml":
		return writeYAML(w, res)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SETTING\tVALUE\tSOURCE\n")
	for _, s := range res.Settings {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, s.Value, s.Source)
	}
	return tw.Flush()
}

// connection: the flag is one of kubectl's connection flags (root persistent flags other than
// gpuctl's own --config and --progress).
func connection(root *cobra.Command, name string) bool {
	return root.PersistentFlags().Lookup(name) != nil && name != "config" && name != "progress"
}

// configFileIn is the config file a setting came from, if any did.
func configFileIn(sources map[string]string) string {
	for _, s := range sources {
		if f, ok := strings.CutPrefix(s, "config file "); ok {
			return f
		}
	}
	return ""
}
