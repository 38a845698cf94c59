package sandbox

import (
	"context"
	"io"
	"sync"

	"k8s.io/client-go/informers"

	"github.com/gpuctl/gpuctl/e2e/sandbox/nfd"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
	nfdstandin "github.com/gpuctl/gpuctl/e2e/sandbox/standin/nfd"
	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
)

// ensureNFD decides whether the sandbox runs Node Feature Discovery's own programs or the stand-in
// (Options.NFDStandIn), and builds the programs (once per cache) when it runs them.
func (c *Cluster) ensureNFD(ctx context.Context, opts Options, progress io.Writer) error {
	switch {
	case opts.NFDStandIn:
		c.nfdWhy = "asked for: a worker process per node does not scale to this many nodes"
		return nil
	case c.Scenario.Distro == "openshift":
		c.nfdWhy = "OpenShift: Red Hat's NFD Operator runs its own build of NFD, not the upstream module"
		return nil
	}
	mount, err := nfd.Probe()
	if err != nil {
		c.nfdWhy = "an nfd-worker cannot get its own mount namespace here: " + err.Error()
		return nil
	}
	b, err := toolchain.EnsureNFD(ctx, opts.CacheDir, progress)
	if err != nil {
		return err
	}
	c.nfdBuild, c.nfdMount = b, mount
	return nil
}

// startNFD runs NFD's programs for NFD v0.19.0's pods (package nfd) until ctx is done, and the stand-in
// for the rest (every NFD pod when the programs do not run here).
func (c *Cluster) startNFD(ctx context.Context, hw map[string]standin.Hardware, run func(string, func(context.Context) error)) {
	if c.nfdBuild == nil {
		run("nfd", func(ctx context.Context) error { return nfdStandIn(ctx, c, hw) })
		return
	}
	// Pods of NFD's other versions (an older GPU operator release's chart pins v0.18.2) have no build
	// here: the stand-in labels their nodes.
	run("nfd", func(ctx context.Context) error { return nfdstandin.RunExcept(ctx, c.agents, hw, nfd.Runs, c.logf) })
	factory := informers.NewSharedInformerFactory(c.Kube, 0)
	c.nfd = nfd.Run(ctx, factory, nfd.Config{
		Kube:       c.Kube,
		NFD:        *c.nfdBuild,
		Mount:      c.nfdMount,
		Dir:        c.Dir,
		Hardware:   hw,
		Kubeconfig: c.cp.KubeconfigWithToken,
		Spawner:    c.cp.Spawner(),
		Logf:       c.logf,
	}, &c.bg)
	factory.Start(ctx.Done())
	c.bg.Add(1)
	go func(wg *sync.WaitGroup) {
		defer wg.Done()
		<-ctx.Done()
		factory.Shutdown()
	}(&c.bg)
}
