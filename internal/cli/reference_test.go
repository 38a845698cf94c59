package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

const referenceDir = "../../docs/reference"

// reference renders the command reference: one Markdown page per command, from the same cobra
// commands gpuctl runs, so it cannot drift from --help.
func reference(t *testing.T) map[string][]byte {
	t.Helper()
	g := &globals{kube: genericclioptions.NewConfigFlags(true)}
	root := newRoot(context.Background(), Streams{}, g, func(string) string { return "" })
	kube := map[string]bool{}
	home, _ := os.UserHomeDir()
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "config" && f.Name != "progress" {
			kube[f.Name] = true
		}
		// A default under the home directory (client-go's --cache-dir) is written as $HOME's, so the
		// reference is the same for every user who generates it.
		if rest, ok := strings.CutPrefix(f.DefValue, home+string(filepath.Separator)); ok && home != "" {
			f.DefValue = filepath.Join("$HOME", rest)
		}
	})
	pages := map[string][]byte{}
	var index []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.IsAvailableCommand() && c != root {
			return
		}
		name := strings.ReplaceAll(c.CommandPath(), " ", "_")
		var b bytes.Buffer
		fmt.Fprintf(&b, "# %s\n\n%s\n\n", c.CommandPath(), c.Short)
		if c.Long != "" {
			fmt.Fprintf(&b, "%s\n\n", c.Long)
		}
		if c.Runnable() {
			fmt.Fprintf(&b, "```\n%s\n```\n\n", c.UseLine())
		}
		if c.HasExample() {
			fmt.Fprintf(&b, "## Examples\n\n```\n%s\n```\n\n", c.Example)
		}
		if own := without(c.LocalFlags(), kube); own.HasAvailableFlags() {
			fmt.Fprintf(&b, "## Flags\n\n```\n%s```\n\n", own.FlagUsages())
		}
		if global := without(c.InheritedFlags(), kube); global.HasAvailableFlags() {
			fmt.Fprintf(&b, "## Global flags\n\n```\n%s```\n\n", global.FlagUsages())
		}
		var subs []string
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				subs = append(subs, fmt.Sprintf("- [%s](%s.md): %s", s.CommandPath(), strings.ReplaceAll(s.CommandPath(), " ", "_"), s.Short))
			}
		}
		if len(subs) > 0 {
			fmt.Fprintf(&b, "## Commands\n\n%s\n\n", strings.Join(subs, "\n"))
		}
		if c.Name() == "options" {
			fmt.Fprintf(&b, "## The connection flags\n\n```\n%s```\n\n", only(root.PersistentFlags(), kube).FlagUsages())
		}
		fmt.Fprintf(&b, "The Kubernetes connection flags every command takes (`--kubeconfig`, `--context`, `-n`, `--as`, …) are listed by [gpuctl options](gpuctl_options.md).\n")
		pages[name+".md"] = b.Bytes()
		index = append(index, fmt.Sprintf("- [%s](%s.md): %s", c.CommandPath(), name, c.Short))
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	sort.Strings(index[1:])
	pages["README.md"] = []byte("# Command reference\n\nGenerated from gpuctl's commands by `go test ./internal/cli -run TestReferenceIsCurrent -update`; a test keeps it current.\n\n" + strings.Join(index, "\n") + "\n")
	return pages
}

func TestReferenceIsCurrent(t *testing.T) {
	pages := reference(t)
	if *update {
		if err := os.RemoveAll(referenceDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(referenceDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range pages {
			if err := os.WriteFile(filepath.Join(referenceDir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	have, err := filepath.Glob(filepath.Join(referenceDir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range have {
		if _, ok := pages[filepath.Base(f)]; !ok {
			t.Errorf("%s documents no command any more: go test ./internal/cli -run TestReferenceIsCurrent -update", f)
		}
	}
	for name, want := range pages {
		got, err := os.ReadFile(filepath.Join(referenceDir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("docs/reference/%s is not current: go test ./internal/cli -run TestReferenceIsCurrent -update", name)
		}
	}
}
