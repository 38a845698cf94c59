package cli

import (
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/profile"
)

// registerCompletions adds dynamic shell completion (gpuctl completion bash|zsh|fish|powershell) for
// the flags whose values gpuctl knows: kube contexts from the kubeconfig, profiles, operator
// releases and preflight check IDs, on every command that has them.
func registerCompletions(root *cobra.Command, g *globals) {
	contexts := func(done string) []string {
		cfg, err := g.kube.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil
		}
		var out []string
		for name, c := range cfg.Contexts {
			out = append(out, done+name+"\tcluster "+c.Cluster+", user "+c.AuthInfo)
		}
		return out
	}
	values := map[string]func(toComplete string) []string{
		"context": func(string) []string { return contexts("") },
		// A comma-separated list: complete the last item, keep the ones before it.
		"contexts": func(toComplete string) []string { return contexts(listDone(toComplete)) },
		"profile": func(string) []string {
			ps, err := profile.List()
			if err != nil {
				return nil
			}
			var out []string
			for _, p := range ps {
				out = append(out, p.Name+"\t"+p.Description)
			}
			return out
		},
		"operator-version": func(string) []string {
			var out []string
			for _, b := range bundle.List() {
				out = append(out, b.Version)
			}
			return out
		},
		"skip-check": func(toComplete string) []string {
			done := listDone(toComplete)
			var out []string
			for _, c := range preflight.Checks() {
				out = append(out, done+c.ID+"\t"+c.Description)
			}
			return out
		},
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		// Each flag once, on the command that defines it: the connection flags on the root, the
		// others on each command that has them.
		own := c.LocalNonPersistentFlags()
		if c == root {
			own = c.PersistentFlags()
		}
		for name, list := range values {
			if own.Lookup(name) == nil {
				continue
			}
			_ = c.RegisterFlagCompletionFunc(name, func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				out := list(toComplete)
				sort.Strings(out)
				return out, cobra.ShellCompDirectiveNoFileComp
			})
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// listDone is the items of a comma-separated list before the one being completed ("a,b," of "a,b,c").
func listDone(toComplete string) string {
	if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
		return toComplete[:i+1]
	}
	return ""
}
