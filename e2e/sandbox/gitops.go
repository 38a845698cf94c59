package sandbox

import (
	"context"
	"io"

	"github.com/gpuctl/gpuctl/e2e/sandbox/gitops"
	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
)

// ensureGitOpsTools builds (once per cache) the registry and Flux's controllers when opts ask for them.
func (c *Cluster) ensureGitOpsTools(ctx context.Context, opts Options, progress io.Writer) error {
	if !opts.Registry && opts.GitOps == "" {
		return nil
	}
	var err error
	if c.registry, err = toolchain.EnsureRegistry(ctx, opts.CacheDir, progress); err != nil {
		return err
	}
	if opts.GitOps == GitOpsFlux {
		c.flux, err = toolchain.EnsureFlux(ctx, opts.CacheDir, progress)
	}
	return err
}

// startGitOps runs the registry and, when asked for, Flux (package gitops) against the running
// control plane.
func (c *Cluster) startGitOps(ctx context.Context, step func(string, ...any)) error {
	g, err := gitops.Start(ctx, gitops.Config{
		Dir:        c.Dir,
		Kubeconfig: c.Kubeconfig,
		Config:     c.Config,
		Spawner:    c.cp.Spawner(),
		Registry:   c.registry,
		Flux:       c.flux,
		Step:       step,
	})
	if err != nil {
		return err
	}
	c.gitops, c.RegistryHost, c.FluxNamespace = g, g.RegistryHost, g.FluxNamespace
	return nil
}
