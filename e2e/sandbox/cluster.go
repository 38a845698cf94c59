package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
	"github.com/gpuctl/gpuctl/internal/bundle"
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
}

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
	Tools *toolchain.Tools

	keepDir bool
	// operatorVersion is Options.OperatorVersion after defaults.
	operatorVersion string
	pki             *pki
	spawner         *spawner
	server          string
	procsMu         sync.Mutex
	procs           []*process
	operator        *operatorFollower
	cancel          context.CancelFunc
	bg              sync.WaitGroup
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
	s := opts.Scenario.Defaults()
	flavor, err := FlavorFor(s.Distro)
	if err != nil {
		return nil, err
	}
	release, err := bundle.Get(opts.OperatorVersion)
	if err != nil {
		return nil, fmt.Errorf("operator version: %w", err)
	}
	s.operatorVersion = release.Version
	tools, err := toolchain.EnsureTools(ctx, opts.CacheDir, progress)
	if err != nil {
		return nil, err
	}
	opBuild, opWarning, err := tools.Operator(release.Version)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(opBuild.Binary); err != nil {
		return nil, fmt.Errorf("the GPU operator controller of %s is not built: %w", release.Version, err)
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "gpuctl-sandbox-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Scenario: s, Flavor: flavor, Tools: tools, keepDir: opts.KeepDir, operatorVersion: release.Version, spawner: newSpawner()}
	defer func() {
		if err != nil {
			if c.log != nil {
				err = fmt.Errorf("%w\n%s", err, c.LogTails(30))
			}
			c.Stop()
		}
	}()
	if c.log, err = os.OpenFile(filepath.Join(dir, "sandbox.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
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
	if opts.NoOperator {
		c.logf("operator: the follower is off (NoOperator): no GPU operator controller will run")
	} else {
		built := strings.Join(slices.Sorted(maps.Keys(tools.Operators)), ", ")
		if built == "" {
			built = "none (the fallback module stands in)"
		}
		c.logf("operator: default release %s; controllers built from NVIDIA's sources: %s", release.Version, built)
	}
	if c.pki, err = newPKI(filepath.Join(dir, "pki")); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, apiPort := ports[0], ports[1], ports[2]

	step("starting etcd %s on 127.0.0.1:%d", toolchain.EtcdVersion, etcdPort)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	if err := c.run("etcd", tools.Etcd,
		"--data-dir="+filepath.Join(dir, "etcd-data"), "--name=sandbox",
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=sandbox="+peerURL, "--quota-backend-bytes=4294967296",
		"--unsafe-no-fsync", // a throwaway cluster: durability buys nothing and fsync costs seconds
		"--log-level=warn"); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, etcdURL+"/health", nil, 30*time.Second); err != nil {
		return nil, fmt.Errorf("etcd did not become healthy: %w", err)
	}

	step("starting kube-apiserver %s on 127.0.0.1:%d", toolchain.KubernetesVersion, apiPort)
	apiArgs := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(apiPort),
		// A loopback advertise address is refused by the default endpoint reconciler.
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + c.pki.path(servingCrtFile), "--tls-private-key-file=" + c.pki.path(servingKeyFile),
		"--client-ca-file=" + c.pki.path(caCertFile),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.pki.path(saPubFile),
		"--service-account-signing-key-file=" + c.pki.path(saKeyFile),
		"--service-cluster-ip-range=10.96.0.0/16",
		"--allow-privileged=true",
		"--cert-dir=" + filepath.Join(dir, "pki", "apiserver"),
	}
	if len(flavor.AdmissionPlugins) > 0 {
		apiArgs = append(apiArgs, "--enable-admission-plugins="+strings.Join(flavor.AdmissionPlugins, ","))
	}
	if flavor.LimitCriticalPods {
		path, err := writeCriticalPodQuotaConfig(dir)
		if err != nil {
			return nil, err
		}
		apiArgs = append(apiArgs, "--admission-control-config-file="+path)
	}
	if err := c.run("kube-apiserver", tools.KubeAPIServer, apiArgs...); err != nil {
		return nil, err
	}
	c.server = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	if c.Kubeconfig, c.Config, err = c.NewUser("sandbox-admin", "system:masters"); err != nil {
		return nil, err
	}
	if c.Kube, err = kubernetes.NewForConfig(c.Config); err != nil {
		return nil, err
	}
	agentsCfg := rest.CopyConfig(c.Config)
	agentsCfg.QPS, agentsCfg.Burst = -1, 0
	if c.agents, err = kubernetes.NewForConfig(agentsCfg); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, c.server+"/readyz", c.Config, 90*time.Second); err != nil {
		return nil, fmt.Errorf("kube-apiserver did not become ready: %w", err)
	}

	step("starting kube-controller-manager, kube-scheduler and kwok %s", toolchain.KwokVersion)
	if err := c.run("kube-controller-manager", tools.KubeControllerManager,
		"--kubeconfig="+c.Kubeconfig, "--authentication-kubeconfig="+c.Kubeconfig, "--authorization-kubeconfig="+c.Kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
		"--service-account-private-key-file="+c.pki.path(saKeyFile), "--root-ca-file="+c.pki.path(caCertFile),
		"--use-service-account-credentials=false",
		// client-go's defaults for the controller manager (20 QPS, burst 30) make the DaemonSet controller
		// create an operand's pods at 20 a second: at 2,000 GPU nodes the operands alone are some 16,000
		// pods, over 13 minutes of client-side throttling before the API server is even busy. Clusters of
		// that size raise these limits (Kubernetes' own scalability tests run the controller manager with
		// --kube-api-qps=100 and more); the sandbox lifts them so its pace is the API server's.
		"--kube-api-qps=1000", "--kube-api-burst=2000",
		// One kwok process renews the leases of every simulated node, through an exempt admin client;
		// real kubelets renew their own under the API server's system-nodes priority level, which
		// workload traffic cannot starve. When two cores are saturated (an install on 2,000 nodes)
		// kwok's renewals can lag past the default 50 s grace, and the lifecycle controller then
		// marks the node's pods NotReady for good: kwok, unlike a kubelet, never reports them Ready
		// again. The sandbox gives the leases five minutes.
		"--node-monitor-grace-period=5m",
		// nodeipam needs a pod CIDR per node, which simulated nodes don't have. The node-lifecycle
		// controller stays on: it removes the not-ready taint once kwok reports a node Ready.
		"--controllers=*,-nodeipam"); err != nil {
		return nil, err
	}
	if err := c.run("kube-scheduler", tools.KubeScheduler,
		"--kubeconfig="+c.Kubeconfig, "--authentication-kubeconfig="+c.Kubeconfig, "--authorization-kubeconfig="+c.Kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
		// The same for the scheduler's bindings (default 50 QPS, burst 100).
		"--kube-api-qps=1000", "--kube-api-burst=2000"); err != nil {
		return nil, err
	}
	c.BrokenGPUNodes = brokenGPUNodes(flavor.Nodes(s), s.BrokenGPUNodes)
	stages, err := writeKwokStages(dir, tools.KwokStages, c.BrokenGPUNodes)
	if err != nil {
		return nil, err
	}
	if err := c.run("kwok", tools.Kwok,
		"--kubeconfig="+c.Kubeconfig, "--config="+stages,
		// Without a lease duration the heartbeat-with-lease stage never renews, and the lifecycle
		// controller marks the nodes' pods NotReady after 40 s.
		"--node-lease-duration-seconds=40",
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.244.0.1/16", "--node-ip=10.244.0.1",
		// At INFO kwok logs every lease renewal and stage it plays: hundreds of lines a second at
		// 2,000 nodes, CPU the simulated cluster needs.
		"--v=WARN"); err != nil {
		return nil, err
	}

	step("simulating %s: %s", flavor.Name, flavor.Description)
	if err := c.applyFlavor(ctx); err != nil {
		return nil, err
	}
	bgCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.startBackground(bgCtx, opts.NoOperator)

	step("waiting for %d nodes to be Ready", len(c.Nodes))
	if err := c.waitNodesReady(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	if err := c.waitDefaultServiceAccount(ctx, time.Minute); err != nil {
		return nil, err
	}
	step("ready in %s; export KUBECONFIG=%s", time.Since(started).Round(100*time.Millisecond), c.Kubeconfig)
	return c, nil
}

// run starts one component with its log in the state directory.
func (c *Cluster) run(name, bin string, args ...string) error {
	p, err := c.spawner.startProcess(name, bin, args, os.Environ(), c.Dir, filepath.Join(c.Dir, name+".log"), 0)
	if err != nil {
		return err
	}
	c.procsMu.Lock()
	c.procs = append(c.procs, p)
	c.procsMu.Unlock()
	return nil
}

// NewUser mints a client certificate for user in groups and writes a kubeconfig for it, for tests of
// what gpuctl does with limited permissions. The user has no rights until RBAC grants some.
func (c *Cluster) NewUser(user string, groups ...string) (kubeconfigPath string, cfg *rest.Config, err error) {
	certPEM, keyPEM, err := c.pki.clientCert(user, groups)
	if err != nil {
		return "", nil, err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["sandbox"] = &clientcmdapi.Cluster{Server: c.server, CertificateAuthorityData: c.pki.caPEM}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	kc.Contexts["sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: user, Namespace: "default"}
	kc.CurrentContext = "sandbox"
	name := "kubeconfig"
	if user != "sandbox-admin" {
		name = "kubeconfig-" + user
	}
	kubeconfigPath = filepath.Join(c.Dir, name)
	if err := clientcmd.WriteToFile(*kc, kubeconfigPath); err != nil {
		return "", nil, err
	}
	cfg, err = clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	if err != nil {
		return "", nil, err
	}
	return kubeconfigPath, cfg, nil
}

// kubeconfigWithToken writes a kubeconfig that authenticates with a bearer token (a service
// account's), as a pod's in-cluster configuration would.
func (c *Cluster) kubeconfigWithToken(name, token string) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["sandbox"] = &clientcmdapi.Cluster{Server: c.server, CertificateAuthorityData: c.pki.caPEM}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: name}
	kc.CurrentContext = "sandbox"
	path := filepath.Join(c.Dir, "kubeconfig-"+name)
	return path, clientcmd.WriteToFile(*kc, path)
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

func waitCRDEstablished(ctx context.Context, ext apiextensionsclient.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			return ext.ApiextensionsV1().CustomResourceDefinitions().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			return ext.ApiextensionsV1().CustomResourceDefinitions().Watch(ctx, o)
		},
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &apiextensionsv1.CustomResourceDefinition{}, nil, func(ev watch.Event) (bool, error) {
		crd, ok := ev.Object.(*apiextensionsv1.CustomResourceDefinition)
		if !ok {
			return false, nil
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
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
	c.procsMu.Lock()
	idx := -1
	for i, p := range c.procs {
		if p.name == "kube-apiserver" {
			idx = i
		}
	}
	if idx < 0 {
		c.procsMu.Unlock()
		return errors.New("no kube-apiserver to restart")
	}
	old := c.procs[idx]
	c.procsMu.Unlock()
	c.logf("restarting kube-apiserver")
	old.stop(30 * time.Second)
	p, err := c.spawner.startProcess(old.name, old.cmd.Path, old.cmd.Args[1:], os.Environ(), c.Dir, old.logPath, 0)
	if err != nil {
		return err
	}
	c.procsMu.Lock()
	c.procs[idx] = p
	c.procsMu.Unlock()
	if err := waitHTTP(ctx, c.server+"/readyz", c.Config, 90*time.Second); err != nil {
		return fmt.Errorf("kube-apiserver did not become ready again: %w", err)
	}
	c.logf("kube-apiserver is ready again")
	return nil
}

// Stop ends every process the sandbox started (the operator first, etcd last), waits for them, and
// removes the state directory unless it was asked to keep it. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		if c.cancel != nil {
			c.cancel()
		}
		c.bg.Wait()
		if c.operator != nil {
			c.operator.stopProcess()
		}
		c.procsMu.Lock()
		procs := slices.Clone(c.procs)
		c.procsMu.Unlock()
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop(10 * time.Second)
		}
		c.spawner.close()
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
	var pids []int
	c.procsMu.Lock()
	defer c.procsMu.Unlock()
	for _, p := range c.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	if c.operator != nil {
		pids = append(pids, c.operator.pids()...)
	}
	return pids
}

// LogTails returns the last n lines of every component's log, for a failing test to print.
func (c *Cluster) LogTails(n int) string {
	var b strings.Builder
	names := []string{"sandbox"}
	c.procsMu.Lock()
	defer c.procsMu.Unlock()
	for _, p := range c.procs {
		names = append(names, p.name)
	}
	names = append(names, "gpu-operator")
	for _, name := range names {
		t := tailFile(filepath.Join(c.Dir, name+".log"), n)
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

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitHTTP polls url until it answers 200: start-up of a process that has no API to watch yet.
func waitHTTP(ctx context.Context, url string, cfg *rest.Config, timeout time.Duration) error {
	client := http.DefaultClient
	if cfg != nil {
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return err
		}
		client = hc
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("%s answered %s", url, resp.Status)
			return false, nil
		}
		return true, nil
	})
	if err != nil && last != nil {
		return errors.Join(err, last)
	}
	return err
}

// writeKwokStages concatenates the kwok stages the sandbox uses: nodes become Ready at once and renew
// their leases; pods become Ready at once, Jobs' pods complete, deleted pods go away; GPU workloads
// that run to completion finish, and fail on the broken GPU nodes (gpuworkload.go).
func writeKwokStages(dir, stages string, broken []string) (string, error) {
	var b strings.Builder
	// kwok renews leases and plays node and pod stages with 4 workers each by default
	// (sigs.k8s.io/kwok pkg/apis/config/v1alpha1/kwok_configuration_types.go@v0.8.0). At 2,000 nodes a
	// lease is due every 10 s per node, 200 renewals a second: four workers fall behind as soon as the
	// API server is busy, the node lifecycle controller marks nodes unreachable (as it would a real node
	// whose kubelet stopped renewing), and the operand DaemonSets' pods queue behind four workers.
	// Real kubelets each renew their own lease, in parallel.
	b.WriteString(kwokConfiguration)
	b.WriteString("\n---\n")
	for _, f := range []string{
		"node/fast/node-initialize.yaml",
		"node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
		"pod/fast/pod-ready.yaml",
		"pod/fast/pod-complete.yaml",
		"pod/fast/pod-delete.yaml",
	} {
		data, err := os.ReadFile(filepath.Join(stages, f))
		if err != nil {
			return "", fmt.Errorf("read kwok stage: %w", err)
		}
		b.Write(data)
		b.WriteString("\n---\n")
	}
	b.WriteString(gpuWorkloadStages(broken))
	path := filepath.Join(dir, "kwok-stages.yaml")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

const kwokConfiguration = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  nodeLeaseParallelism: 32
  nodePlayStageParallelism: 16
  podPlayStageParallelism: 16
`

// writeCriticalPodQuotaConfig limits pods of the system-node-critical and system-cluster-critical
// priority classes to namespaces with a ResourceQuota that covers them, as GKE's API server does.
// That is why NVIDIA's GKE instructions create a ResourceQuota in the operator's namespace
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html); with this config the sandbox rejects operand pods when gpuctl forgets it.
func writeCriticalPodQuotaConfig(dir string) (string, error) {
	const quota = `apiVersion: apiserver.config.k8s.io/v1
kind: ResourceQuotaConfiguration
limitedResources:
- resource: pods
  matchScopes:
  - scopeName: PriorityClass
    operator: In
    values: ["system-node-critical", "system-cluster-critical"]
`
	quotaPath := filepath.Join(dir, "resource-quota-config.yaml")
	admission := fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ResourceQuota
  path: %s
`, quotaPath)
	admissionPath := filepath.Join(dir, "admission-config.yaml")
	if err := os.WriteFile(quotaPath, []byte(quota), 0o644); err != nil {
		return "", err
	}
	return admissionPath, os.WriteFile(admissionPath, []byte(admission), 0o644)
}
