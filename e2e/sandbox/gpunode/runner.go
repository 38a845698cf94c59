package gpunode

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/Masterminds/semver/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/gpuctl/gpuctl/e2e/sandbox/controlplane"
	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml"
	"github.com/gpuctl/gpuctl/e2e/sandbox/nfd"
	"github.com/gpuctl/gpuctl/e2e/sandbox/podrun"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
)

// Config is what the Runner needs of the sandbox.
type Config struct {
	// Kube is an admin client: the Runner mints tokens for the pods' service accounts. Agents is the
	// nodes' agents' client, with which each node's kubelet device manager writes its node's status.
	Kube, Agents kubernetes.Interface
	// Build are NVIDIA's device plugin programs (toolchain.EnsureDevicePlugin); MockNVML is the mock
	// libnvidia-ml.so.1 (toolchain.EnsureMockNVML).
	Build    toolchain.DevicePlugin
	MockNVML string
	// Mount is mount(8) (nfd.Probe found it working in a new mount namespace).
	Mount string
	// Dir is the sandbox's state directory: each program logs to gpunode-<pod>.log there; the nodes'
	// NVML configs and driver roots, and the pods' configs, are written below gpunode/.
	Dir string
	// Hardware is each simulated node's hardware; MIG is their GPUs' MIG state.
	Hardware map[string]standin.Hardware
	MIG      *standin.MIGHardware
	// Kubeconfig writes a kubeconfig that authenticates with a service account's token.
	Kubeconfig func(name, token string) (string, error)
	// Spawner starts the processes.
	Spawner *controlplane.Spawner
	// Logf writes a line to the sandbox's log.
	Logf func(format string, args ...any)
}

// The programs the Runner runs, by the name the pods' containers run them by.
const (
	pluginProgram = "nvidia-device-plugin"
	gfdProgram    = "gpu-feature-discovery"
)

// Runner runs NVIDIA's device plugin and GFD for the pods the scheduler placed (see the package doc).
type Runner struct {
	cfg      Config
	sup      *podrun.Supervisor
	nodes    corelisters.NodeLister
	pods     corelisters.PodLister
	sockRoot string // short: a unix socket's path has at most 107 bytes

	writeMu  sync.Mutex // one node's files are written by one start at a time
	ctx      context.Context
	wg       *sync.WaitGroup
	mu       sync.Mutex
	kubelets map[string]bool   // nodes whose kubelet device manager runs
	shown    map[string]string // the MIG layout (Encode) each node's mock NVML last showed
}

// Run starts a Runner on factory's informers (the caller starts the factory) until ctx is done,
// counted in wg. Stop its processes with Stop after that.
func Run(ctx context.Context, factory informers.SharedInformerFactory, cfg Config, wg *sync.WaitGroup) (*Runner, error) {
	sockRoot, err := os.MkdirTemp("", "gpunode-")
	if err != nil {
		return nil, err
	}
	nodes := factory.Core().V1().Nodes()
	r := &Runner{cfg: cfg, nodes: nodes.Lister(), pods: factory.Core().V1().Pods().Lister(), sockRoot: sockRoot, ctx: ctx, wg: wg, kubelets: map[string]bool{}, shown: map[string]string{}}
	_, err = nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: r.nodeUpdated})
	if err != nil {
		return nil, err
	}
	r.sup = podrun.Run(ctx, factory, podrun.Spec{Name: "gpunode", Select: r.selectPod, Start: r.start, Logf: cfg.Logf}, wg, nodes.Informer().HasSynced)
	cfg.MIG.Watch(func(node string) {
		r.mu.Lock()
		changed := r.shown[node] != shows(cfg.Hardware[node].GPUs, cfg.MIG.Layout(node))
		r.mu.Unlock()
		if changed {
			r.restartNode(node, "its GPUs' MIG state changed (NVIDIA's MIG manager restarts the GPU operands)")
		}
	})
	return r, nil
}

// nodeUpdated restarts a node's programs when its config label changes: NVIDIA's config-manager
// sidecar then writes the newly picked config and sends the plugin and GFD SIGHUP.
func (r *Runner) nodeUpdated(oldObj, newObj any) {
	o, ok1 := oldObj.(*corev1.Node)
	n, ok2 := newObj.(*corev1.Node)
	if ok1 && ok2 && o.Labels[configLabel] != n.Labels[configLabel] {
		r.restartNode(n.Name, fmt.Sprintf("its label %s changed to %q", configLabel, n.Labels[configLabel]))
	}
}

func (r *Runner) restartNode(node, why string) {
	r.sup.Restart(why, func(p *corev1.Pod) bool { return p.Spec.NodeName == node })
}

// Runs reports whether the Runner runs p's program (for standin/deviceplugin.RunExcept).
func (r *Runner) Runs(p *corev1.Pod) bool {
	run, _ := r.selectPod(p)
	return run
}

// container returns the container of p that runs the device plugin or GFD from NVIDIA's device
// plugin image, and the program. The operator's plugin container runs /bin/entrypoint.sh, which
// execs nvidia-device-plugin (NVIDIA/gpu-operator assets/state-device-plugin/0400_configmap.yaml at
// v26.7.0); the container is named for it.
func container(p *corev1.Pod) (*corev1.Container, string) {
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		switch {
		case !strings.HasPrefix(path.Base(c.Image), "k8s-device-plugin:"):
		case standin.RunsProgram(c, gfdProgram):
			return c, gfdProgram
		case c.Name == pluginProgram || standin.RunsProgram(c, pluginProgram):
			return c, pluginProgram
		}
	}
	return nil, ""
}

// selectPod runs p when it is a device plugin or GFD pod of image v0.19 or newer on a node whose GPU
// model the mock NVML knows.
func (r *Runner) selectPod(p *corev1.Pod) (bool, string) {
	c, prog := container(p)
	if prog == "" {
		return false, ""
	}
	_, tag, _ := strings.Cut(path.Base(c.Image), ":")
	v, err := semver.NewVersion(tag)
	if err != nil || v.LessThan(semver.MustParse("v0.19.0")) {
		return false, fmt.Sprintf("its image %s is older than the build the sandbox has (%s); the device-plugin stand-in serves its node", c.Image, toolchain.DevicePluginVersion)
	}
	if ok, why := r.Serves(p.Spec.NodeName); !ok {
		return false, why
	}
	if prog == gfdProgram && envValue(c, "USE_NODE_FEATURE_API") == "false" {
		return false, "GFD writes a features.d file (USE_NODE_FEATURE_API=false, OpenShift), which the sandbox's NFD does not read; the stand-in labels its node"
	}
	if prog == gfdProgram && !r.nfdMasterRuns() {
		return false, "no nfd-master of NFD's own runs to turn GFD's NodeFeature into labels; the stand-in labels the node as GFD and NFD would"
	}
	return true, ""
}

// nfdMasterRuns reports whether NFD's own nfd-master runs (package nfd runs it for a Running pod):
// GFD's labels reach a node only through it. Without one (a cluster without NFD) the stand-in plays
// GFD and NFD together, as it did before NFD's own programs ran in the sandbox.
func (r *Runner) nfdMasterRuns() bool {
	pods, err := r.pods.List(labels.Everything())
	if err != nil {
		return false
	}
	return slices.ContainsFunc(pods, func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil &&
			standin.PodSpecRuns(&p.Spec, "nfd-master") && nfd.Runs(p)
	})
}

// Serves reports whether NVIDIA's programs can serve node, and why not: it has GPUs of a model the
// mock NVML knows (a vGPU guest's A100-40C is not one: its driver is NVIDIA's vGPU guest driver).
func (r *Runner) Serves(node string) (bool, string) {
	hw := r.cfg.Hardware[node]
	if hw.GPUs == 0 {
		return false, "node " + node + " has no GPUs"
	}
	if _, ok := mocknvml.LookupModel(hw.GPUProduct); !ok {
		return false, fmt.Sprintf("the mock NVML does not know node %s's GPU %s; the device-plugin stand-in serves it", node, hw.GPUProduct)
	}
	return true, ""
}

func envValue(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// Stop stops every process and waits for them; the kubelet device managers end with the Runner's ctx.
func (r *Runner) Stop() {
	r.sup.Stop()
	os.RemoveAll(r.sockRoot)
}

// PIDs are the running processes' IDs.
func (r *Runner) PIDs() []int { return r.sup.PIDs() }

// nodeDir is where a node's NVML config and driver root are written.
func (r *Runner) nodeDir(node string) string {
	return filepath.Join(r.cfg.Dir, "gpunode", "nodes", node)
}
