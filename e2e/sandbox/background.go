package sandbox

import (
	"context"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
)

// startBackground runs what makes the simulated cluster behave like a real one beyond what kwok does:
// the operator follower and the stand-ins. They stop when ctx is cancelled (Stop).
func (c *Cluster) startBackground(ctx context.Context, noOperator bool) {
	hw := make(map[string]Hardware, len(c.Nodes))
	for _, n := range c.Nodes {
		hw[n.Node.Name] = n.Hardware
	}
	run := func(name string, fn func(context.Context) error) {
		c.bg.Add(1)
		go func() {
			defer c.bg.Done()
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				c.logf("%s stand-in stopped: %v", name, err)
			}
		}()
	}
	run("nfd", func(ctx context.Context) error { return runNFDStandIn(ctx, c.Kube, hw, c.logf) })
	run("device-plugin", func(ctx context.Context) error { return runDevicePluginStandIn(ctx, c.Kube, hw, c.logf) })
	if c.Scenario.Distro == "openshift" {
		dyn, err := dynamic.NewForConfig(c.Config)
		if err != nil {
			c.logf("olm stand-in not started: %v", err)
		} else {
			crds, err := readCRDs(c.Tools.OperatorCRDs)
			if err != nil {
				c.logf("olm stand-in: the GPU operator bundle will carry no CRDs: %v", err)
			}
			bundles := map[string][]*unstructured.Unstructured{"gpu-operator-certified": crds}
			run("olm", func(ctx context.Context) error { return runOLMStandIn(ctx, c.Kube, dyn, bundles, c.logf) })
		}
	}
	if !noOperator {
		factory := informers.NewSharedInformerFactory(c.Kube, 0)
		c.startOperatorFollower(ctx, factory)
		factory.Start(ctx.Done())
		c.bg.Add(1)
		go func() {
			defer c.bg.Done()
			<-ctx.Done()
			factory.Shutdown()
		}()
	}
}

// readCRDs reads the CRD manifests in dir (one per file).
func readCRDs(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}
