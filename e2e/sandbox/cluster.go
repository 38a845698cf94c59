package sandbox

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/gpuctl/gpuctl/e2e/sandbox/controlplane"
	"github.com/gpuctl/gpuctl/e2e/sandbox/gitops"
	"github.com/gpuctl/gpuctl/e2e/sandbox/gpunode"
	"github.com/gpuctl/gpuctl/e2e/sandbox/operator"
	"github.com/gpuctl/gpuctl/e2e/sandbox/podrun"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/kube"
)

// Options configure Start.
type Options struct {
	Scenario
	// Dir holds the cluster's state (etcd data, certificates, kubeconfigs, logs). Default: a new
	// temporary directory. Stop removes it unless KeepDir.
	Dir     string
	KeepDir bool
	// CacheDir is where built tools are kept (default DefaultCacheDir()).
	CacheDir string
	// Progress receives one line per start-up step and the tool build's progress (nil: discarded).
	Progress io.Writer
	// NoOperator turns off the operator follower: the real GPU operator controller is then never run.
	NoOperator bool
	// OperatorVersion is a GPU Operator release of gpuctl's catalog ("v26.7.0"; default: gpuctl's
	// default release). Start checks that its controller is built; the OpenShift flavour's catalog
	// offers it as the head of the default channel; and the follower runs it for an operator image
	// whose tag names no release of the catalog. Otherwise the follower runs the release the operator
	// Deployment's image names, whatever this says.
	OperatorVersion string
	// Registry runs an OCI registry (plain HTTP, no auth) on a loopback port: Cluster.RegistryHost.
	Registry bool
	// GitOps runs a GitOps controller against the cluster: "" none, "flux" (GitOpsFlux) Flux's
	// source-controller and helm-controller, with their CRDs and namespace (Cluster.FluxNamespace).
	// Flux implies Registry.
	GitOps string
	// NFDStandIn labels the nodes with the NFD stand-in (standin/nfd) instead of running Node Feature
	// Discovery's own nfd-master, nfd-worker and nfd-gc (package nfd): for the benches' hundreds of
	// nodes, where a worker process per node does not fit on the machine. OpenShift sandboxes always
	// use the stand-in (Red Hat's NFD Operator runs its own NFD build), and so does a machine where a
	// worker cannot get its own mount namespace (not root); sandbox.log says which runs.
	NFDStandIn bool
	// DevicePluginStandIn serves the GPU nodes with the device-plugin stand-in (standin/deviceplugin)
	// instead of running NVIDIA's device plugin and GPU Feature Discovery over a mock NVML per node
	// (package gpunode): for the benches. Where NFD's stand-in runs, so does this one.
	DevicePluginStandIn bool
}

// GitOpsFlux is the Options.GitOps that runs Flux.
const GitOpsFlux = gitops.Flux

// Cluster is a running sandbox.
type Cluster struct {
	// Dir is the state directory; Kubeconfig the admin kubeconfig in it.
	Dir, Kubeconfig string
	// Config and Kube are admin clients (user sandbox-admin in group system:masters).
	Config *rest.Config
	Kube   kubernetes.Interface
	// agents is an admin client with no client-side rate limit, for what many agents do in parallel
	// on a real cluster, each with its own client: kubelets registering their nodes and writing their
	// status, nfd-workers. client-go's default limit (5 requests a second) would take 400 s to
	// register 2,000 nodes.
	agents kubernetes.Interface
	// Scenario is the scenario after defaults; Flavor the distribution's flavour; Nodes the nodes created.
	Scenario Scenario
	Flavor   Flavor
	Nodes    []SimNode
	// BrokenGPUNodes names the GPU nodes whose GPU fails every workload (Scenario.BrokenGPUNodes).
	BrokenGPUNodes []string
	// Tools are the programs it runs.
	Tools *Tools
	// RegistryHost is the OCI registry's host:port ("127.0.0.1:PORT"; Options.Registry), plain HTTP
	// and no auth, "" without one: charts are pushed to oci://RegistryHost/REPO.
	RegistryHost string
	// FluxNamespace is "flux-system" once Flux's source-controller and helm-controller answer their
	// readiness checks (Options.GitOps "flux"), "" when Flux is not run. Both watch every namespace.
	FluxNamespace string

	keepDir bool
	// operatorVersion is Options.OperatorVersion after defaults.
	operatorVersion string
	cp              *controlplane.ControlPlane
	operator        *operator.Follower
	// nfd runs Node Feature Discovery's programs (nil: the stand-in labels the nodes); nfdBuild and
	// nfdMount are what it runs with, decided by prepare.
	nfd      *podrun.Supervisor
	nfdBuild *toolchain.NFD
	nfdMount string
	nfdWhy   string // why the stand-in runs instead
	// gpunode runs NVIDIA's device plugin and GFD (nil: the stand-in serves the nodes), with
	// gpunodeBuild and mockNVML, decided by prepare.
	gpunode      *gpunode.Runner
	gpunodeBuild *toolchain.DevicePlugin
	mockNVML     string
	gpunodeWhy   string
	cancel       context.CancelFunc
	bg           sync.WaitGroup
	// registry and flux are the GitOps programs asked for (nil/"": none); gitops runs them.
	registry string
	flux     *toolchain.Flux
	gitops   *gitops.GitOps
	// mig is the MIG state of the simulated GPUs (see MIGLayout).
	mig *standin.MIGHardware
	// bundles caches the OLM stand-in's bundle CRDs by release.
	bundleMu sync.Mutex
	bundles  map[string][]*unstructured.Unstructured
	logMu    sync.Mutex
	log      *os.File
	stopOnce sync.Once
}

// Start brings up etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok on free
// loopback ports, registers the flavour's API groups, creates its nodes and objects, starts the
// stand-ins and the operator follower, and returns once every node is Ready. On error everything it
// started is stopped again.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	c, opWarning, err := prepare(ctx, opts, progress)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			if c.log != nil {
				err = fmt.Errorf("%w\n%s", err, c.LogTails(30))
			}
			c.Stop()
		}
	}()
	if c.log, err = os.OpenFile(filepath.Join(c.Dir, "sandbox.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, err
	}
	step := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		fmt.Fprintf(progress, "sandbox: %s\n", msg)
		c.logf("%s", msg)
	}
	started := time.Now()
	if opWarning != "" {
		step("WARNING: %s", opWarning)
	}
	c.logOperatorReleases(opts.NoOperator)
	c.BrokenGPUNodes = brokenGPUNodes(c.Flavor.Nodes(c.Scenario), c.Scenario.BrokenGPUNodes)
	if err := c.cp.Start(ctx, controlplane.Config{
		Tools:             c.Tools,
		AdmissionPlugins:  c.Flavor.AdmissionPlugins,
		LimitCriticalPods: c.Flavor.LimitCriticalPods,
		BrokenGPUNodes:    c.BrokenGPUNodes,
		Step:              step,
	}); err != nil {
		return nil, err
	}
	if err := c.connect(); err != nil {
		return nil, err
	}

	step("simulating %s: %s", c.Flavor.Name, c.Flavor.Description)
	if err := c.applyFlavor(ctx); err != nil {
		return nil, err
	}
	bgCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	if c.nfdBuild == nil {
		step("NFD: the stand-in labels the nodes (%s)", c.nfdWhy)
	} else {
		step("NFD: Node Feature Discovery %s's own nfd-master, nfd-worker and nfd-gc run for its pods", toolchain.NFDVersion)
	}
	if c.gpunodeBuild == nil {
		step("device plugin and GFD: the stand-in serves the GPU nodes (%s)", c.gpunodeWhy)
	} else {
		step("device plugin and GFD: NVIDIA's own %s run for their pods, over a mock NVML per GPU node", toolchain.DevicePluginVersion)
	}
	c.startBackground(bgCtx, opts.NoOperator)

	step("waiting for %d nodes to be Ready", len(c.Nodes))
	if err := c.waitNodesReady(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	if err := c.waitDefaultServiceAccount(ctx, time.Minute); err != nil {
		return nil, err
	}
	if c.registry != "" {
		if err := c.startGitOps(ctx, step); err != nil {
			return nil, err
		}
	}
	step("ready in %s; export KUBECONFIG=%s", time.Since(started).Round(100*time.Millisecond), c.Kubeconfig)
	return c, nil
}

// prepare resolves the options (scenario defaults, flavour, operator release), makes sure the tools are
// built, and makes the state directory; it starts nothing. It returns the tool cache's warning about
// the operator release, if any.
func prepare(ctx context.Context, opts Options, progress io.Writer) (*Cluster, string, error) {
	s := opts.Scenario.Defaults()
	if opts.GitOps != "" && opts.GitOps != GitOpsFlux {
		return nil, "", fmt.Errorf("unknown GitOps controller %q (want %q or none)", opts.GitOps, GitOpsFlux)
	}
	flavor, err := FlavorFor(s.Distro)
	if err != nil {
		return nil, "", err
	}
	release, err := bundle.Get(opts.OperatorVersion)
	if err != nil {
		return nil, "", fmt.Errorf("operator version: %w", err)
	}
	s = s.WithOperatorVersion(release.Version)
	tools, err := EnsureTools(ctx, opts.CacheDir, progress)
	if err != nil {
		return nil, "", err
	}
	c := &Cluster{Scenario: s, Flavor: flavor, Tools: tools, keepDir: opts.KeepDir, operatorVersion: release.Version, mig: standin.NewMIGHardware()}
	if err := c.ensureGitOpsTools(ctx, opts, progress); err != nil {
		return nil, "", err
	}
	if err := c.ensureNFD(ctx, opts, progress); err != nil {
		return nil, "", err
	}
	if err := c.ensureGPUNode(ctx, opts, progress); err != nil {
		return nil, "", err
	}
	opBuild, opWarning, err := tools.Operator(release.Version)
	if err != nil {
		return nil, "", err
	}
	if _, err := os.Stat(opBuild.Binary); err != nil {
		return nil, "", fmt.Errorf("the GPU operator controller of %s is not built: %w", release.Version, err)
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "gpuctl-sandbox-"); err != nil {
			return nil, "", err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	c.Dir, c.cp = dir, controlplane.New(dir)
	return c, opWarning, nil
}

// logOperatorReleases records in sandbox.log which GPU operator controllers the follower can run.
func (c *Cluster) logOperatorReleases(noOperator bool) {
	if noOperator {
		c.logf("operator: the follower is off (NoOperator): no GPU operator controller will run")
		return
	}
	built := strings.Join(slices.Sorted(maps.Keys(c.Tools.Operators)), ", ")
	if built == "" {
		built = "none (the fallback module stands in)"
	}
	c.logf("operator: default release %s; controllers built from NVIDIA's sources: %s", c.operatorVersion, built)
}

// connect makes the admin clients of the running control plane.
func (c *Cluster) connect() error {
	var err error
	c.Kubeconfig, c.Config = c.cp.Kubeconfig, c.cp.Config
	if c.Kube, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	agentsCfg := rest.CopyConfig(c.Config)
	agentsCfg.QPS, agentsCfg.Burst = -1, 0
	c.agents, err = kubernetes.NewForConfig(agentsCfg)
	return err
}

// NewUser mints a client certificate for user in groups and writes a kubeconfig for it, for tests of
// what gpuctl does with limited permissions. The user has no rights until RBAC grants some.
func (c *Cluster) NewUser(user string, groups ...string) (kubeconfigPath string, cfg *rest.Config, err error) {
	return c.cp.NewUser(user, groups...)
}

// applyFlavor registers the flavour's CRDs and creates its nodes and objects.
func (c *Cluster) applyFlavor(ctx context.Context) error {
	ext, err := apiextensionsclient.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	var crds []apiextensionsv1.CustomResourceDefinition
	if c.Flavor.CRDs != nil {
		crds = c.Flavor.CRDs()
	}
	for i := range crds {
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crds[i], metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("register CRD %s: %w", crds[i].Name, err)
		}
	}
	for _, crd := range crds {
		if err := waitCRDEstablished(ctx, ext, crd.Name); err != nil {
			return err
		}
	}
	c.Nodes = c.Flavor.Nodes(c.Scenario)
	// Kubelets register their nodes in parallel, each with its node's status, which the API server
	// keeps on create.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range c.Nodes {
		g.Go(func() error {
			n := c.Nodes[i].Node
			if _, err := c.agents.CoreV1().Nodes().Create(gctx, &n, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create node %s: %w", n.Name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if c.Flavor.Objects == nil {
		return nil
	}
	objs := c.Flavor.Objects(c.Scenario)
	if len(objs) == 0 {
		return nil
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	for i := range objs {
		if err := createObject(ctx, dyn, mapper, &objs[i]); err != nil {
			return err
		}
	}
	return nil
}

// createObject creates obj and then writes its status, if it has one, through the status subresource.
func createObject(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("map %s: %w", gvk, err)
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	status, hasStatus := obj.Object["status"]
	created, err := ri.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	if hasStatus {
		created.Object["status"] = status
		if _, err := ri.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("set status of %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
	return nil
}

// waitCRDEstablished waits up to 30 s, with gpuctl's own watch, until the API server serves the CRD.
func waitCRDEstablished(ctx context.Context, ext apiextensionsclient.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := kube.WaitCRDEstablished(ctx, ext, name); err != nil {
		return fmt.Errorf("CRD %s not established: %w", name, err)
	}
	return nil
}

// waitNodesReady waits, with a watch, until every sandbox node is Ready and free of the not-ready taint.
func (c *Cluster) waitNodesReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	want := map[string]bool{}
	for _, n := range c.Nodes {
		want[n.Node.Name] = false
	}
	lw := cache.NewListWatchFromClient(c.Kube.CoreV1().RESTClient(), "nodes", "", fields.Everything())
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Node{}, nil, func(ev watch.Event) (bool, error) {
		n, ok := ev.Object.(*corev1.Node)
		if !ok {
			return false, nil
		}
		if _, tracked := want[n.Name]; tracked {
			want[n.Name] = nodeReady(n)
		}
		for _, ready := range want {
			if !ready {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		var notReady []string
		for _, name := range slices.Sorted(maps.Keys(want)) {
			if !want[name] {
				notReady = append(notReady, name)
			}
		}
		return fmt.Errorf("nodes not Ready: %s: %w", strings.Join(notReady, ", "), err)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady {
			return false
		}
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitDefaultServiceAccount waits for the service-account controller: until it has made
// default/default, pods cannot be created.
func (c *Cluster) waitDefaultServiceAccount(ctx context.Context, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// RestartAPIServer stops kube-apiserver (SIGTERM, as a rolling control-plane upgrade does) and starts
// it again with the same flags on the same port, then waits until it is ready. Clients see their
// connections and watches drop and requests refused meanwhile: tests use it to prove that gpuctl's
// watches re-establish and transient errors are retried.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	return c.cp.RestartAPIServer(ctx, c.logf)
}

// Stop ends every process the sandbox started (the operator first, etcd last), waits for them, and
// removes the state directory unless it was asked to keep it. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		if c.cancel != nil {
			c.cancel()
		}
		c.bg.Wait()
		c.gitops.Stop()
		if c.operator != nil {
			c.operator.Stop()
		}
		if c.nfd != nil {
			c.nfd.Stop()
		}
		if c.gpunode != nil {
			c.gpunode.Stop()
		}
		c.cp.Stop()
		if c.log != nil {
			c.log.Close()
		}
		if !c.keepDir {
			_ = os.RemoveAll(c.Dir)
		}
	})
}

// PIDs are the process IDs of everything the sandbox runs now (for tests that check for orphans).
func (c *Cluster) PIDs() []int {
	pids := append(c.cp.PIDs(), c.gitops.PIDs()...)
	if c.operator != nil {
		pids = append(pids, c.operator.PIDs()...)
	}
	if c.nfd != nil {
		pids = append(pids, c.nfd.PIDs()...)
	}
	if c.gpunode != nil {
		pids = append(pids, c.gpunode.PIDs()...)
	}
	return pids
}

// LogTails returns the last n lines of every component's log, for a failing test to print.
func (c *Cluster) LogTails(n int) string {
	var b strings.Builder
	names := append([]string{"sandbox"}, c.cp.Names()...)
	names = append(names, gitops.LogNames()...)
	names = append(names, "gpu-operator")
	// NFD's programs, NVIDIA's device plugin and GFD log per pod (nfd-<pod>.log, package nfd;
	// gpunode-<pod>.log, package gpunode), a node's kubelet device manager per node.
	for _, glob := range []string{"nfd-*.log", "gpunode-*.log"} {
		logs, _ := filepath.Glob(filepath.Join(c.Dir, glob))
		for _, l := range logs {
			names = append(names, strings.TrimSuffix(filepath.Base(l), ".log"))
		}
	}
	for _, name := range names {
		t := controlplane.TailFile(filepath.Join(c.Dir, name+".log"), n)
		if t == "" {
			continue
		}
		fmt.Fprintf(&b, "----- %s.log (last %d lines) -----\n%s\n", name, n, t)
	}
	return b.String()
}

// logf writes a line to sandbox.log (stand-ins and the operator follower report there).
func (c *Cluster) logf(format string, args ...any) {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	if c.log != nil {
		fmt.Fprintf(c.log, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
}

// brokenGPUNodes names the last n GPU nodes of nodes: the ones Scenario.BrokenGPUNodes marks broken.
func brokenGPUNodes(nodes []SimNode, n int) []string {
	var gpu []string
	for _, sn := range nodes {
		if sn.Hardware.GPUs > 0 {
			gpu = append(gpu, sn.Node.Name)
		}
	}
	if n > len(gpu) {
		n = len(gpu)
	}
	return gpu[len(gpu)-n:]
}

// OperatorRun is one run of the real GPU operator controller (operator.Run).
type OperatorRun = operator.Run

// OperatorRuns lists every run of the real GPU operator controller in this sandbox, oldest first
// (nil when the follower is off). A run that ended without the sandbox stopping it (a crash, an exit
// of the controller's own) has its ExitErr set ("exit status 1", "signal: killed").
func (c *Cluster) OperatorRuns() []OperatorRun {
	if c.operator == nil {
		return nil
	}
	return c.operator.Runs()
}

// OperatorNamespace is the namespace the real operator controller runs for now, "" when it is not
// running (no operator Deployment, or its pod not Running yet, or the follower is off).
func (c *Cluster) OperatorNamespace() string {
	if c.operator == nil {
		return ""
	}
	return c.operator.Namespace()
}

// MIGLayout is the MIG state of node's simulated GPUs, as NVIDIA's MIG manager (here its stand-in)
// last left it; it is kept by the GPUs, not in the cluster's objects (standin.MIGHardware).
func (c *Cluster) MIGLayout(node string) standin.MIGLayout { return c.mig.Layout(node) }
