package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/e2e/sandbox/operator"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/dra"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/migmanager"
	nfdstandin "github.com/gpuctl/gpuctl/e2e/sandbox/standin/nfd"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/olm"
)

// startBackground runs what makes the simulated cluster behave like a real one beyond what kwok does:
// the operator follower and the stand-ins. They stop when ctx is cancelled (Stop).
func (c *Cluster) startBackground(ctx context.Context, noOperator bool) {
	hw := make(map[string]standin.Hardware, len(c.Nodes))
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
	// The stand-ins do what a node's own agents do (its kubelet, its nfd-worker), thousands of them in
	// parallel on a large cluster: they use the agents' client, which has no client-side limit.
	c.startNFD(ctx, hw, run)
	c.startDevicePlugin(ctx, hw, run)
	run("mig-manager", func(ctx context.Context) error {
		return migmanager.Run(ctx, c.agents, hw, c.mig, c.defaultMIGPartedConfig, c.logf)
	})
	run("dra-kubelet-plugin", func(ctx context.Context) error { return dra.Run(ctx, c.agents, hw, c.logf) })
	if c.Scenario.Distro == "openshift" {
		dyn, err := dynamic.NewForConfig(c.Config)
		if err != nil {
			c.logf("olm stand-in not started: %v", err)
		} else {
			run("olm", func(ctx context.Context) error { return olm.Run(ctx, c.Kube, dyn, c.bundleCRDs, c.logf) })
			run("nfd-operator", func(ctx context.Context) error { return nfdstandin.RunOperator(ctx, c.Kube, dyn, c.logf) })
		}
	}
	if !noOperator {
		factory := informers.NewSharedInformerFactory(c.Kube, 0)
		c.operator = operator.Follow(ctx, factory, operator.Config{
			Kube:           c.Kube,
			Dir:            c.Dir,
			DefaultRelease: c.operatorVersion,
			Build:          c.Tools.Operator,
			Kubeconfig:     c.cp.KubeconfigWithToken,
			Spawner:        c.cp.Spawner(),
			Logf:           c.logf,
		}, &c.bg)
		factory.Start(ctx.Done())
		c.bg.Add(1)
		go func() {
			defer c.bg.Done()
			<-ctx.Done()
			factory.Shutdown()
		}()
	}
}

// defaultMIGPartedConfig is the mig-parted config file of the operator's default-mig-parted-config
// ConfigMap, read from the default release's own state manifest (assets/state-mig-manager/0400_configmap.yaml
// of NVIDIA/gpu-operator): what the MIG-manager stand-in applies while the operator has not created
// the ConfigMap.
func (c *Cluster) defaultMIGPartedConfig() ([]byte, error) {
	b, _, err := c.Tools.Operator(c.operatorVersion)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(b.Root, "state-mig-manager", "0400_configmap.yaml"))
	if err != nil {
		return nil, err
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(data, &cm); err != nil {
		return nil, fmt.Errorf("default-mig-parted-config: %w", err)
	}
	return []byte(cm.Data["config.yaml"]), nil
}

// bundleCRDs are the CRDs of a package's bundle at a CSV version, as OLM would unpack them:
// for gpu-operator-certified, the CRD files of that release's bundle/manifests (else its
// config/crd/bases), read from the tool cache, so that an OLM install of v26.3.3 gets v26.3.3's CRDs.
func (c *Cluster) bundleCRDs(pkg, version string) ([]*unstructured.Unstructured, error) {
	if pkg != "gpu-operator-certified" {
		return nil, nil
	}
	release := "v" + strings.TrimPrefix(version, "v")
	c.bundleMu.Lock()
	defer c.bundleMu.Unlock()
	if crds, ok := c.bundles[release]; ok {
		return crds, nil
	}
	b, warning, err := c.Tools.Operator(release)
	if err != nil {
		return nil, err
	}
	if warning != "" {
		c.logf("olm stand-in: WARNING: the bundle of %s carries the fallback module's CRDs: %s", release, warning)
	}
	for _, dir := range []string{b.BundleCRDs, b.CRDs} {
		if dir == "" {
			continue
		}
		crds, err := readCRDs(dir)
		if err != nil {
			return nil, err
		}
		if len(crds) > 0 {
			if c.bundles == nil {
				c.bundles = map[string][]*unstructured.Unstructured{}
			}
			c.bundles[release] = crds
			return crds, nil
		}
	}
	return nil, fmt.Errorf("no CRDs for %s in %s", release, b.CRDs)
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

// nfdStandIn runs the NFD stand-in (standin/nfd) where NFD's own programs do not run (Options.NFDStandIn).
func nfdStandIn(ctx context.Context, c *Cluster, hw map[string]standin.Hardware) error {
	return nfdstandin.Run(ctx, c.agents, hw, c.logf)
}
