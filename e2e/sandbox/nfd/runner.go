package nfd

import (
	"context"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/gpuctl/gpuctl/e2e/sandbox/controlplane"
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

// Runner runs NFD's programs for the NFD pods the scheduler placed (see the package doc).
type Runner struct {
	cfg     Config
	trigger chan struct{}
	pods    corelisters.PodLister
	nodes   corelisters.NodeLister

	mu      sync.Mutex
	procs   map[types.UID]*process
	ignored map[types.UID]bool // pods not run (another image), logged once
	stopped bool
}

// process is one NFD program run for one pod.
type process struct {
	pod       string // namespace/name
	proc      *controlplane.Process
	crashes   int
	notBefore time.Time
}

// Run starts a Runner on factory's pod and node informers (the caller starts the factory); it runs
// until ctx is done, counted in wg. Stop its processes with Stop after that.
func Run(ctx context.Context, factory informers.SharedInformerFactory, cfg Config, wg *sync.WaitGroup) *Runner {
	r := &Runner{
		cfg:     cfg,
		trigger: make(chan struct{}, 1),
		pods:    factory.Core().V1().Pods().Lister(),
		nodes:   factory.Core().V1().Nodes().Lister(),
		procs:   map[types.UID]*process{},
		ignored: map[types.UID]bool{},
	}
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(standin.OnAnyChange(func(any) { r.poke() }))
	nodesSynced := factory.Core().V1().Nodes().Informer().HasSynced
	wg.Add(1)
	go func() {
		defer wg.Done()
		if !cache.WaitForCacheSync(ctx.Done(), factory.Core().V1().Pods().Informer().HasSynced, nodesSynced) {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.trigger:
				r.reconcile(ctx)
			}
		}
	}()
	return r
}

func (r *Runner) poke() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
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

func (r *Runner) reconcile(ctx context.Context) {
	pods, err := r.pods.List(labels.Everything())
	if err != nil {
		return
	}
	want := map[types.UID]*corev1.Pod{}
	for _, p := range pods {
		c, prog := container(p)
		if prog == "" || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
			continue
		}
		if !upstreamImage(c.Image) {
			r.mu.Lock()
			if !r.ignored[p.UID] {
				r.ignored[p.UID] = true
				r.cfg.Logf("nfd: not running %s for pod %s/%s: its image %s is not NFD %s, the build the sandbox has; the NFD stand-in labels its node", prog, p.Namespace, p.Name, c.Image, toolchain.NFDVersion)
			}
			r.mu.Unlock()
			continue
		}
		want[p.UID] = p
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	for uid, pr := range r.procs {
		if want[uid] == nil {
			r.cfg.Logf("nfd: stopping the process of pod %s", pr.pod)
			pr.proc.Stop(10 * time.Second)
			pr.proc = nil // its exit is no crash (watchExit)
			delete(r.procs, uid)
		}
	}
	for uid, p := range want {
		pr := r.procs[uid]
		if pr != nil && pr.proc.Running() {
			continue
		}
		if pr != nil && time.Now().Before(pr.notBefore) {
			time.AfterFunc(time.Until(pr.notBefore), r.poke)
			continue
		}
		proc, err := r.start(ctx, p)
		if err != nil {
			r.cfg.Logf("nfd: pod %s/%s: %v", p.Namespace, p.Name, err)
			time.AfterFunc(10*time.Second, r.poke)
			continue
		}
		if pr == nil {
			pr = &process{pod: p.Namespace + "/" + p.Name}
			r.procs[uid] = pr
		}
		pr.proc = proc
		go r.watchExit(pr, proc)
	}
}

// watchExit sets a kubelet-like back-off when a program exits without the Runner stopping it.
func (r *Runner) watchExit(pr *process, proc *controlplane.Process) {
	started := time.Now()
	<-proc.Exited()
	r.mu.Lock()
	defer r.mu.Unlock()
	if pr.proc != proc || r.stopped {
		return
	}
	if time.Since(started) > 10*time.Minute {
		pr.crashes = 0
	}
	backoff := min(10*time.Second<<pr.crashes, 5*time.Minute)
	pr.crashes++
	pr.notBefore = time.Now().Add(backoff)
	r.cfg.Logf("nfd: the process of pod %s exited (%v); restarting in %s", pr.pod, proc.Err(), backoff)
	time.AfterFunc(backoff, r.poke)
}

// start runs the pod's NFD program as the pod would: its arguments, its environment (NODE_NAME,
// POD_NAME, … from the pod), its ConfigMaps, its service account's token, and for a worker its node's
// host paths in its own mount namespace. Two flags are added: -kubeconfig (a pod finds the API
// server in-cluster) and -port on a free port (every pod has its own :8080; the processes share one
// network namespace).
func (r *Runner) start(ctx context.Context, p *corev1.Pod) (*controlplane.Process, error) {
	c, prog := container(p)
	dir := filepath.Join(r.cfg.Dir, "nfd", p.Namespace+"-"+p.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args, err := r.args(ctx, p, c, prog, dir)
	if err != nil {
		return nil, err
	}
	env := podEnv(p, c)
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
	if lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		fmt.Fprintf(lf, "===== %s: running %s %s (built from sigs.k8s.io/node-feature-discovery) for pod %s/%s (image %s)%s\n",
			time.Now().Format(time.RFC3339), prog, toolchain.NFDVersion, p.Namespace, p.Name, c.Image, where)
		lf.Close()
	}
	r.cfg.Logf("nfd: running %s %s for pod %s/%s%s", prog, toolchain.NFDVersion, p.Namespace, p.Name, where)
	return r.cfg.Spawner.Start(prog, bin, args, env, dir, logPath, unshare)
}

// args are the container's arguments plus the sandbox's: -kubeconfig, -port and, where the pod mounts
// the program's config file from a ConfigMap, -config at a copy of it.
func (r *Runner) args(ctx context.Context, p *corev1.Pod, c *corev1.Container, prog, dir string) ([]string, error) {
	var args []string
	for i, a := range slices.Concat(c.Command, c.Args) {
		if i == 0 && path.Base(a) == prog {
			continue
		}
		args = append(args, a)
	}
	sa := p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	expiry := int64((24 * time.Hour).Seconds())
	tok, err := r.cfg.Kube.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for service account %s/%s: %w", p.Namespace, sa, err)
	}
	kubeconfig, err := r.cfg.Kubeconfig("nfd-"+p.Namespace+"-"+p.Name, tok.Status.Token)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args = append(args, "-kubeconfig="+kubeconfig, fmt.Sprintf("-port=%d", port))
	if prog == "nfd-gc" {
		return args, nil
	}
	// NFD's default config path (cmd/nfd-worker and cmd/nfd-master, v0.19.0).
	const confDir = "/etc/kubernetes/node-feature-discovery"
	conf, err := r.configFile(ctx, p, c, confDir+"/"+prog+".conf", dir)
	if err != nil {
		return nil, err
	}
	if conf != "" && !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(strings.TrimLeft(a, "-"), "config") }) {
		args = append(args, "-config="+conf)
	}
	return args, nil
}

// configFile copies the file the pod would see at want from the ConfigMap mounted over it into dir,
// and returns the copy's path ("" when no ConfigMap provides it).
func (r *Runner) configFile(ctx context.Context, p *corev1.Pod, c *corev1.Container, want, dir string) (string, error) {
	for _, vm := range c.VolumeMounts {
		rel, err := filepath.Rel(vm.MountPath, want)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.Name != vm.Name || v.ConfigMap == nil {
				continue
			}
			cm, err := r.cfg.Kube.CoreV1().ConfigMaps(p.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				return "", fmt.Errorf("configmap %s/%s: %w", p.Namespace, v.ConfigMap.Name, err)
			}
			key := rel
			for _, item := range v.ConfigMap.Items {
				if item.Path == rel {
					key = item.Key
				}
			}
			data, ok := cm.Data[key]
			if !ok {
				continue
			}
			out := filepath.Join(dir, filepath.Base(want))
			return out, os.WriteFile(out, []byte(data), 0o644)
		}
	}
	return "", nil
}

// podEnv is the process's environment: the sandbox's own (PATH, …) and the container's variables,
// with the downward-API fields NFD's chart uses resolved from the pod. KUBERNETES_NAMESPACE is where
// NFD looks for its namespace when no service account namespace file is mounted
// (pkg/utils/kubernetes.go, GetKubernetesNamespace, v0.19.0).
func podEnv(p *corev1.Pod, c *corev1.Container) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	fields := map[string]string{
		"metadata.name": p.Name, "metadata.namespace": p.Namespace, "metadata.uid": string(p.UID),
		"spec.nodeName": p.Spec.NodeName, "spec.serviceAccountName": p.Spec.ServiceAccountName,
		"status.podIP": p.Status.PodIP, "status.hostIP": p.Status.HostIP,
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil:
			env = append(env, e.Name+"="+fields[e.ValueFrom.FieldRef.FieldPath])
		}
	}
	return append(env, "KUBERNETES_NAMESPACE="+p.Namespace)
}

// freePort is a TCP port free on this machine now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop stops every process and waits for them.
func (r *Runner) Stop() {
	r.mu.Lock()
	r.stopped = true
	procs := r.procs
	r.procs = map[types.UID]*process{}
	r.mu.Unlock()
	for _, pr := range procs {
		pr.proc.Stop(10 * time.Second)
	}
}

// PIDs are the running processes' IDs.
func (r *Runner) PIDs() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var pids []int
	for _, pr := range r.procs {
		if pr.proc.Running() {
			pids = append(pids, pr.proc.Pid())
		}
	}
	return pids
}
