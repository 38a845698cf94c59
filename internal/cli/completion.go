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
	values := map[string]func(toComplete string) []string{
		"context": func(string) []string { return kubeContexts(g, "") },
		// A comma-separated list: complete the last item, keep the ones before it.
		"contexts":         func(toComplete string) []string { return kubeContexts(g, listDone(toComplete)) },
		"profile":          func(string) []string { return profileNames() },
		"operator-version": func(string) []string { return operatorVersions() },
		"skip-check":       func(toComplete string) []string { return checkNames(listDone(toComplete)) },
	}
	registerFlagCompletions(root, root, values)
}

// registerFlagCompletions registers the completion of each flag of values on c and its subcommands,
// each flag once, on the command that defines it: the connection flags on root, the others on each
// command that has them.
func registerFlagCompletions(root, c *cobra.Command, values map[string]func(toComplete string) []string) {
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
		registerFlagCompletions(root, s, values)
	}
}

// kubeContexts completes a kube context: the kubeconfig's contexts, each after done, with its
// cluster and user as the description.
func kubeContexts(g *globals, done string) []string {
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

// profileNames completes --profile: the values profiles, with their descriptions.
func profileNames() []string {
	ps, err := profile.List()
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range ps {
		out = append(out, p.Name+"\t"+p.Description)
	}
	return out
}

// operatorVersions completes --operator-version: the GPU Operator releases gpuctl can install.
func operatorVersions() []string {
	var out []string
	for _, b := range bundle.List() {
		out = append(out, b.Version)
	}
	return out
}

// checkNames completes --skip-check: the preflight checks' IDs, each after done, with their
// descriptions.
func checkNames(done string) []string {
	var out []string
	for _, c := range preflight.Checks() {
		out = append(out, done+c.ID+"\t"+c.Description)
	}
	return out
}

// listDone is the items of a comma-separated list before the one being completed ("a,b," of "a,b,c").
func listDone(toComplete string) string {
	if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
		return toComplete[:i+1]
	}
	return ""
}
