package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/driverimage"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/step"
)

// PrecompiledNone is upgrade's --precompiled value that takes the recorded "auto" off: the driver
// is then as the values say (driver.usePrecompiled, the ClusterPolicy's or NVIDIADriver default).
const PrecompiledNone = "none"

// precompiledFacts asks the registry the install's driver is pulled from which of the GPU nodes'
// kernels it has a precompiled driver image for (--precompiled auto). first is the plan without
// them: its NVIDIADriver "default" names the repository, the image, the driver version (whose branch
// tags the precompiled images) and the pull secrets. A registry that cannot be asked is not an error:
// the facts say why, and the plan builds the driver everywhere.
func (i *Install) precompiledFacts(ctx context.Context, det *detect.Result, first *plan.Plan) (*plan.PrecompiledFacts, error) {
	f := &plan.PrecompiledFacts{}
	groups := map[string]*plan.KernelImage{}
	var keys []string
	for _, n := range det.GPUNodes {
		k := n.Kernel + "\x00" + n.OSImage
		g, ok := groups[k]
		if !ok {
			g = &plan.KernelImage{Kernel: n.Kernel, OSImage: n.OSImage}
			groups[k] = g
			keys = append(keys, k)
		}
		g.Nodes = append(g.Nodes, n.Name)
	}
	slices.Sort(keys)
	if len(keys) == 0 {
		return f, nil
	}
	objs, _, err := step.Render(ctx, first, det.KubernetesVersion)
	if err != nil {
		return nil, fmt.Errorf("render the plan to find the driver image: %w", err)
	}
	var spec *driverimage.Spec
	for _, s := range driverimage.Specs(objs) {
		if s.Owner == "NVIDIADriver default" {
			spec = &s
		}
	}
	if spec == nil {
		return nil, errors.New("--precompiled auto: the plan renders no NVIDIADriver default to take the driver image from")
	}
	f.Repository, f.Branch = spec.Repository+"/"+spec.Image, driverimage.Branch(spec.Version)
	for _, k := range keys {
		g := groups[k]
		if osTag := driverimage.OSTagFromImage(g.OSImage); osTag != "" && g.Kernel != "" {
			g.Tag = driverimage.PrecompiledTag(f.Branch, g.Kernel, osTag)
		}
		f.Kernels = append(f.Kernels, *g)
	}
	tags, err := i.registry().Tags(ctx, f.Repository, driverimage.PullSecretConfigs(ctx, i.Clients.Kube, first.Namespace, spec.PullSecrets))
	switch {
	case errors.Is(err, driverimage.ErrNoRepository):
		// No such repository holds no precompiled image: every kernel is judged, none published.
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		f.Unknown = fmt.Sprintf("cannot list the tags of %s (%v)", f.Repository, err)
		return f, nil
	}
	for j := range f.Kernels {
		f.Kernels[j].Published = f.Kernels[j].Tag != "" && slices.Contains(tags, f.Kernels[j].Tag)
	}
	return f, nil
}

// registry is the run's registry client (tagCache), made on first use.
func (i *Install) registry() *tagCache {
	if i.tags == nil {
		i.tags = &tagCache{}
	}
	return i.tags
}

// tagCache lists each repository's tags once per run, through the OCI distribution API: the lookup
// before --precompiled auto's plan and preflight's precompiled-driver check after it ask the same
// registry for the same repository. An answer cut short by the run's own context is not kept.
type tagCache struct {
	mu    sync.Mutex
	lists map[string]tagAnswer
}

type tagAnswer struct {
	tags []string
	err  error
}

// Tags is driverimage.Registry's, each repository asked once; the deadline is registryTimeout's.
func (c *tagCache) Tags(ctx context.Context, repository string, dockerConfigs [][]byte) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.lists[repository]; ok {
		return a.tags, a.err
	}
	tags, err := (&driverimage.Registry{Timeout: registryTimeout(ctx)}).Tags(ctx, repository, dockerConfigs)
	if ctx.Err() == nil {
		if c.lists == nil {
			c.lists = map[string]tagAnswer{}
		}
		c.lists[repository] = tagAnswer{tags, err}
	}
	return tags, err
}
