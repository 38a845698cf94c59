package sandbox

import (
	"context"
	"io"

	"k8s.io/client-go/informers"

	"github.com/gpuctl/gpuctl/e2e/sandbox/gpunode"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/deviceplugin"
	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
)

// ensureGPUNode decides whether the sandbox runs NVIDIA's device plugin and GPU Feature Discovery
// (package gpunode) or the stand-in (Options.DevicePluginStandIn), and builds them and the mock NVML
// (once per cache) when it runs them. GFD publishes NodeFeatures for nfd-master: they run where NFD's
// own programs run.
func (c *Cluster) ensureGPUNode(ctx context.Context, opts Options, progress io.Writer) error {
	switch {
	case opts.DevicePluginStandIn:
		c.gpunodeWhy = "asked for: a plugin process per node does not scale to this many nodes"
		return nil
	case c.nfdBuild == nil:
		c.gpunodeWhy = "NFD's stand-in runs (" + c.nfdWhy + "), and GFD's NodeFeatures need nfd-master"
		return nil
	}
	b, err := toolchain.EnsureDevicePlugin(ctx, opts.CacheDir, progress)
	if err != nil {
		return err
	}
	lib, err := toolchain.EnsureMockNVML(ctx, opts.CacheDir, progress)
	if err != nil {
		return err
	}
	c.gpunodeBuild, c.mockNVML = b, lib
	return nil
}

// startDevicePlugin runs NVIDIA's device plugin and GFD for their pods on GPU nodes (package
// gpunode) until ctx is done, and the stand-in for the rest (every such pod when they do not run
// here).
func (c *Cluster) startDevicePlugin(ctx context.Context, hw map[string]standin.Hardware, run func(string, func(context.Context) error)) {
	if c.gpunodeBuild == nil {
		run("device-plugin", func(ctx context.Context) error { return deviceplugin.Run(ctx, c.agents, hw, c.mig, c.logf) })
		return
	}
	factory := informers.NewSharedInformerFactory(c.Kube, 0)
	r, err := gpunode.Run(ctx, factory, gpunode.Config{
		Kube:       c.Kube,
		Agents:     c.agents,
		Build:      *c.gpunodeBuild,
		MockNVML:   c.mockNVML,
		Mount:      c.nfdMount,
		Dir:        c.Dir,
		Hardware:   hw,
		MIG:        c.mig,
		Kubeconfig: c.cp.KubeconfigWithToken,
		Spawner:    c.cp.Spawner(),
		Logf:       c.logf,
	}, &c.bg)
	if err != nil {
		c.logf("NVIDIA's device plugin not started (%v): the stand-in serves every node", err)
		run("device-plugin", func(ctx context.Context) error { return deviceplugin.Run(ctx, c.agents, hw, c.mig, c.logf) })
		return
	}
	c.gpunode = r
	run("device-plugin", func(ctx context.Context) error {
		return deviceplugin.RunExcept(ctx, c.agents, hw, c.mig, r.Runs, c.logf)
	})
	factory.Start(ctx.Done())
	c.bg.Go(func() {
		<-ctx.Done()
		factory.Shutdown()
	})
}

// NVIDIAsDevicePluginServes reports whether NVIDIA's device plugin and GFD serve node (package
// gpunode), and why not.
func (c *Cluster) NVIDIAsDevicePluginServes(node string) (bool, string) {
	if c.gpunode == nil {
		return false, "the device-plugin stand-in serves this sandbox: " + c.gpunodeWhy
	}
	return c.gpunode.Serves(node)
}
