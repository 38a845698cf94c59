package nfd

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox/controlplane"
	"github.com/gpuctl/gpuctl/e2e/sandbox/podrun"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
)

// Config is what the Runner needs of the sandbox.
type Config struct {
	// Kube is an admin client: the Runner mints tokens for the pods' service accounts.
	Kube kubernetes.Interface
	// NFD are the built programs (toolchain.EnsureNFD).
	NFD toolchain.NFD
	// Mount is mount(8), as Probe found it.
	Mount string
	// Dir is the sandbox's state directory: each program logs to nfd-<pod>.log there, and the nodes'
	// trees and the pods' ConfigMaps are written below nfd/.
	Dir string
	// Hardware is each simulated node's hardware (nodes not in it have none).
	Hardware map[string]standin.Hardware
	// Kubeconfig writes a kubeconfig that authenticates with a service account's token.
	Kubeconfig func(name, token string) (string, error)
	// Spawner starts the processes.
	Spawner *controlplane.Spawner
	// Logf writes a line to the sandbox's log.
	Logf func(format string, args ...any)
}

// programs are NFD's programs the Runner runs, by the name a pod's container runs them by.
func (c Config) programs() map[string]string {
	return map[string]string{"nfd-master": c.NFD.Master, "nfd-worker": c.NFD.Worker, "nfd-gc": c.NFD.GC}
}

// Run runs NFD's programs for the NFD pods the scheduler placed (see the package doc) on factory's
// informers (the caller starts the factory) until ctx is done, counted in wg. Stop the processes with
// the Supervisor's Stop after that.
func Run(ctx context.Context, factory informers.SharedInformerFactory, cfg Config, wg *sync.WaitGroup) *podrun.Supervisor {
	nodes := factory.Core().V1().Nodes()
	r := &runner{cfg: cfg, nodes: nodes.Lister()}
	return podrun.Run(ctx, factory, podrun.Spec{Name: "nfd", Select: selectPod, Start: r.start, Logf: cfg.Logf}, wg, nodes.Informer().HasSynced)
}

// runner starts NFD's programs.
type runner struct {
	cfg   Config
	nodes corelisters.NodeLister
}

// selectPod runs the pods whose container runs one of NFD's programs from NFD's image of the version
// built; the NFD stand-in labels the nodes of the others.
func selectPod(p *corev1.Pod) (bool, string) {
	c, prog := container(p)
	switch {
	case prog == "":
		return false, ""
	case !upstreamImage(c.Image):
		return false, fmt.Sprintf("its image %s is not NFD %s, the build the sandbox has; the NFD stand-in labels its node", c.Image, toolchain.NFDVersion)
	}
	return true, ""
}

// container returns the pod's container that runs one of NFD's programs, and the program.
func container(p *corev1.Pod) (*corev1.Container, string) {
	for i := range p.Spec.Containers {
		for _, prog := range []string{"nfd-master", "nfd-worker", "nfd-gc"} {
			if standin.RunsProgram(&p.Spec.Containers[i], prog) {
				return &p.Spec.Containers[i], prog
			}
		}
	}
	return nil, ""
}

// Runs reports whether the Runner runs pod's NFD program: a container of it runs nfd-master,
// nfd-worker or nfd-gc from NFD's image of the version built. The NFD stand-in labels the nodes of
// the other NFD pods (standin/nfd.RunExcept).
func Runs(p *corev1.Pod) bool {
	c, prog := container(p)
	return prog != "" && upstreamImage(c.Image)
}

// upstreamImage reports whether image is NFD's own image of the version built
// (registry.k8s.io/nfd/node-feature-discovery:v0.19.0, or a mirror of it, or its -minimal/-full variants).
func upstreamImage(image string) bool {
	name, tag, ok := strings.Cut(path.Base(image), ":")
	return ok && name == "node-feature-discovery" && strings.HasPrefix(tag, toolchain.NFDVersion)
}

// start runs the pod's NFD program as the pod would: its arguments, its environment (NODE_NAME,
// POD_NAME, … from the pod), its ConfigMaps, its service account's token, and for a worker its node's
// host paths in its own mount namespace. Two flags are added: -kubeconfig (a pod finds the API
// server in-cluster) and -port on a free port (every pod has its own :8080; the processes share one
// network namespace).
func (r *runner) start(ctx context.Context, p *corev1.Pod) (*controlplane.Process, error) {
	c, prog := container(p)
	dir := filepath.Join(r.cfg.Dir, "nfd", p.Namespace+"-"+p.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args, err := r.args(ctx, p, c, prog, dir)
	if err != nil {
		return nil, err
	}
	env := append(podrun.Env(p, c), "KUBERNETES_NAMESPACE="+p.Namespace)
	logPath := filepath.Join(r.cfg.Dir, "nfd-"+p.Name+".log")
	bin, unshare := r.cfg.programs()[prog], uintptr(0)
	where := ""
	if prog == "nfd-worker" {
		node, err := r.nodes.Get(p.Spec.NodeName)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", p.Spec.NodeName, err)
		}
		tree := filepath.Join(r.cfg.Dir, "nfd", "nodes", node.Name)
		if err := writeTree(tree, r.cfg.Hardware[node.Name], node.Status.NodeInfo.KernelVersion); err != nil {
			return nil, fmt.Errorf("host paths of node %s: %w", node.Name, err)
		}
		bin, args, unshare = namespaceWrap(r.cfg.Mount, hostMounts(p, c, tree), tree, append([]string{bin}, args...)...)
		where = fmt.Sprintf(" over node %s's host paths (%s) in its own mount namespace", node.Name, tree)
	}
	podrun.Note(logPath, "===== %s: running %s %s (built from sigs.k8s.io/node-feature-discovery) for pod %s/%s (image %s)%s",
		time.Now().Format(time.RFC3339), prog, toolchain.NFDVersion, p.Namespace, p.Name, c.Image, where)
	r.cfg.Logf("nfd: running %s %s for pod %s/%s%s", prog, toolchain.NFDVersion, p.Namespace, p.Name, where)
	return r.cfg.Spawner.Start(prog, bin, args, env, dir, logPath, unshare)
}

// args are the container's arguments plus the sandbox's: -kubeconfig, -port and, where the pod mounts
// the program's config file from a ConfigMap, -config at a copy of it.
func (r *runner) args(ctx context.Context, p *corev1.Pod, c *corev1.Container, prog, dir string) ([]string, error) {
	var args []string
	for i, a := range slices.Concat(c.Command, c.Args) {
		if i == 0 && path.Base(a) == prog {
			continue
		}
		args = append(args, a)
	}
	kubeconfig, err := podrun.Kubeconfig(ctx, r.cfg.Kube, p, func(name, token string) (string, error) {
		return r.cfg.Kubeconfig("nfd-"+name, token)
	})
	if err != nil {
		return nil, err
	}
	port, err := podrun.FreePort()
	if err != nil {
		return nil, err
	}
	args = append(args, "-kubeconfig="+kubeconfig, fmt.Sprintf("-port=%d", port))
	if prog == "nfd-gc" {
		return args, nil
	}
	// NFD's default config path (cmd/nfd-worker and cmd/nfd-master, v0.19.0).
	const confDir = "/etc/kubernetes/node-feature-discovery"
	conf, err := podrun.ConfigMapFile(ctx, r.cfg.Kube, p, c, confDir+"/"+prog+".conf", dir)
	if err != nil {
		return nil, err
	}
	if conf != "" && !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(strings.TrimLeft(a, "-"), "config") }) {
		args = append(args, "-config="+conf)
	}
	return args, nil
}
