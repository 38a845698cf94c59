package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
)

// Config says what control plane to bring up.
type Config struct {
	// Tools are the programs to run (toolchain.EnsureTools).
	Tools *toolchain.Tools
	// AdmissionPlugins are enabled beyond upstream's defaults (the flavour's).
	AdmissionPlugins []string
	// LimitCriticalPods admits system-node-critical and system-cluster-critical pods only in
	// namespaces with a ResourceQuota for them (GKE's API server).
	LimitCriticalPods bool
	// BrokenGPUNodes name the nodes whose GPU fails every workload (kwok's GPU workload stages).
	BrokenGPUNodes []string
	// Step reports one start-up step (progress and the sandbox's log).
	Step func(format string, args ...any)
}

// ControlPlane is the sandbox's real Kubernetes servers and kwok, each a child process with its log
// in Dir.
type ControlPlane struct {
	// Dir is the state directory (etcd data, certificates, kubeconfigs, logs).
	Dir string
	// Server is the API server's URL; Kubeconfig and Config the admin's (user sandbox-admin in group
	// system:masters), set once the API server runs.
	Server     string
	Kubeconfig string
	Config     *rest.Config

	pki     *pki
	spawner *Spawner
	procsMu sync.Mutex
	procs   []*Process
}

// New prepares a control plane in dir; Start brings it up, Stop ends what it started.
func New(dir string) *ControlPlane {
	return &ControlPlane{Dir: dir, spawner: NewSpawner()}
}

// Spawner is the thread every child process of the sandbox is started from (see Spawner).
func (cp *ControlPlane) Spawner() *Spawner { return cp.spawner }

// Start brings up etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok on free
// loopback ports and returns once the API server is ready. On error the caller stops what started.
func (cp *ControlPlane) Start(ctx context.Context, cfg Config) error {
	var err error
	if cp.pki, err = newPKI(filepath.Join(cp.Dir, "pki")); err != nil {
		return err
	}
	ports, err := FreePorts(3)
	if err != nil {
		return err
	}
	etcdURL, err := cp.startEtcd(ctx, cfg, ports[0], ports[1])
	if err != nil {
		return err
	}
	if err := cp.startAPIServer(ctx, cfg, etcdURL, ports[2]); err != nil {
		return err
	}
	cfg.Step("starting kube-controller-manager, kube-scheduler and kwok %s", toolchain.KwokVersion)
	if err := cp.startControllerManager(cfg); err != nil {
		return err
	}
	if err := cp.startScheduler(cfg); err != nil {
		return err
	}
	return cp.startKwok(cfg)
}

func (cp *ControlPlane) startEtcd(ctx context.Context, cfg Config, port, peerPort int) (string, error) {
	cfg.Step("starting etcd %s on 127.0.0.1:%d", toolchain.EtcdVersion, port)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	if err := cp.run("etcd", cfg.Tools.Etcd,
		"--data-dir="+filepath.Join(cp.Dir, "etcd-data"), "--name=sandbox",
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=sandbox="+peerURL, "--quota-backend-bytes=4294967296",
		"--unsafe-no-fsync", // a throwaway cluster: durability buys nothing and fsync costs seconds
		"--log-level=warn"); err != nil {
		return "", err
	}
	if err := waitHTTP(ctx, etcdURL+"/health", nil, 30*time.Second); err != nil {
		return "", fmt.Errorf("etcd did not become healthy: %w", err)
	}
	return etcdURL, nil
}

func (cp *ControlPlane) startAPIServer(ctx context.Context, cfg Config, etcdURL string, port int) error {
	cfg.Step("starting kube-apiserver %s on 127.0.0.1:%d", toolchain.KubernetesVersion, port)
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		// A loopback advertise address is refused by the default endpoint reconciler.
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + cp.pki.path(servingCrtFile), "--tls-private-key-file=" + cp.pki.path(servingKeyFile),
		"--client-ca-file=" + cp.pki.path(caCertFile),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + cp.pki.path(saPubFile),
		"--service-account-signing-key-file=" + cp.pki.path(saKeyFile),
		"--service-cluster-ip-range=10.96.0.0/16",
		"--allow-privileged=true",
		"--cert-dir=" + filepath.Join(cp.Dir, "pki", "apiserver"),
	}
	if len(cfg.AdmissionPlugins) > 0 {
		args = append(args, "--enable-admission-plugins="+strings.Join(cfg.AdmissionPlugins, ","))
	}
	if cfg.LimitCriticalPods {
		path, err := writeCriticalPodQuotaConfig(cp.Dir)
		if err != nil {
			return err
		}
		args = append(args, "--admission-control-config-file="+path)
	}
	if err := cp.run("kube-apiserver", cfg.Tools.KubeAPIServer, args...); err != nil {
		return err
	}
	cp.Server = fmt.Sprintf("https://127.0.0.1:%d", port)
	var err error
	if cp.Kubeconfig, cp.Config, err = cp.NewUser("sandbox-admin", "system:masters"); err != nil {
		return err
	}
	if err := waitHTTP(ctx, cp.Server+"/readyz", cp.Config, 90*time.Second); err != nil {
		return fmt.Errorf("kube-apiserver did not become ready: %w", err)
	}
	return nil
}

func (cp *ControlPlane) startControllerManager(cfg Config) error {
	return cp.run("kube-controller-manager", cfg.Tools.KubeControllerManager,
		"--kubeconfig="+cp.Kubeconfig, "--authentication-kubeconfig="+cp.Kubeconfig, "--authorization-kubeconfig="+cp.Kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
		"--service-account-private-key-file="+cp.pki.path(saKeyFile), "--root-ca-file="+cp.pki.path(caCertFile),
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
		"--controllers=*,-nodeipam")
}

func (cp *ControlPlane) startScheduler(cfg Config) error {
	return cp.run("kube-scheduler", cfg.Tools.KubeScheduler,
		"--kubeconfig="+cp.Kubeconfig, "--authentication-kubeconfig="+cp.Kubeconfig, "--authorization-kubeconfig="+cp.Kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
		// The same for the scheduler's bindings (default 50 QPS, burst 100).
		"--kube-api-qps=1000", "--kube-api-burst=2000")
}

func (cp *ControlPlane) startKwok(cfg Config) error {
	stages, err := writeKwokStages(cp.Dir, cfg.Tools.KwokStages, cfg.BrokenGPUNodes)
	if err != nil {
		return err
	}
	return cp.run("kwok", cfg.Tools.Kwok,
		"--kubeconfig="+cp.Kubeconfig, "--config="+stages,
		// Without a lease duration the heartbeat-with-lease stage never renews, and the lifecycle
		// controller marks the nodes' pods NotReady after 40 s.
		"--node-lease-duration-seconds=40",
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.244.0.1/16", "--node-ip=10.244.0.1",
		// At INFO kwok logs every lease renewal and stage it plays: hundreds of lines a second at
		// 2,000 nodes, CPU the simulated cluster needs.
		"--v=WARN")
}

// run starts one component with its log in the state directory.
func (cp *ControlPlane) run(name, bin string, args ...string) error {
	p, err := cp.spawner.Start(name, bin, args, os.Environ(), cp.Dir, filepath.Join(cp.Dir, name+".log"), 0)
	if err != nil {
		return err
	}
	cp.procsMu.Lock()
	cp.procs = append(cp.procs, p)
	cp.procsMu.Unlock()
	return nil
}

// NewUser mints a client certificate for user in groups and writes a kubeconfig for it. The user has
// no rights until RBAC grants some.
func (cp *ControlPlane) NewUser(user string, groups ...string) (kubeconfigPath string, cfg *rest.Config, err error) {
	certPEM, keyPEM, err := cp.pki.clientCert(user, groups)
	if err != nil {
		return "", nil, err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["sandbox"] = &clientcmdapi.Cluster{Server: cp.Server, CertificateAuthorityData: cp.pki.caPEM}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	kc.Contexts["sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: user, Namespace: "default"}
	kc.CurrentContext = "sandbox"
	name := "kubeconfig"
	if user != "sandbox-admin" {
		name = "kubeconfig-" + user
	}
	kubeconfigPath = filepath.Join(cp.Dir, name)
	if err := clientcmd.WriteToFile(*kc, kubeconfigPath); err != nil {
		return "", nil, err
	}
	cfg, err = clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	if err != nil {
		return "", nil, err
	}
	return kubeconfigPath, cfg, nil
}

// KubeconfigWithToken writes a kubeconfig that authenticates with a bearer token (a service
// account's), as a pod's in-cluster configuration would.
func (cp *ControlPlane) KubeconfigWithToken(name, token string) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["sandbox"] = &clientcmdapi.Cluster{Server: cp.Server, CertificateAuthorityData: cp.pki.caPEM}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: name}
	kc.CurrentContext = "sandbox"
	path := filepath.Join(cp.Dir, "kubeconfig-"+name)
	return path, clientcmd.WriteToFile(*kc, path)
}

// RestartAPIServer stops kube-apiserver (SIGTERM) and starts it again with the same flags on the same
// port, then waits until it is ready.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context, logf func(string, ...any)) error {
	cp.procsMu.Lock()
	idx := -1
	for i, p := range cp.procs {
		if p.name == "kube-apiserver" {
			idx = i
		}
	}
	if idx < 0 {
		cp.procsMu.Unlock()
		return errors.New("no kube-apiserver to restart")
	}
	old := cp.procs[idx]
	cp.procsMu.Unlock()
	logf("restarting kube-apiserver")
	old.Stop(30 * time.Second)
	p, err := cp.spawner.Start(old.name, old.cmd.Path, old.cmd.Args[1:], os.Environ(), cp.Dir, old.logPath, 0)
	if err != nil {
		return err
	}
	cp.procsMu.Lock()
	cp.procs[idx] = p
	cp.procsMu.Unlock()
	if err := waitHTTP(ctx, cp.Server+"/readyz", cp.Config, 90*time.Second); err != nil {
		return fmt.Errorf("kube-apiserver did not become ready again: %w", err)
	}
	logf("kube-apiserver is ready again")
	return nil
}

// Stop ends every process the control plane started, the last started first (etcd last), and waits
// for them; then no child process can be started from its spawner any more.
func (cp *ControlPlane) Stop() {
	cp.procsMu.Lock()
	procs := slices.Clone(cp.procs)
	cp.procsMu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop(10 * time.Second)
	}
	cp.spawner.Close()
}

// PIDs are the process IDs of the control plane's processes.
func (cp *ControlPlane) PIDs() []int {
	cp.procsMu.Lock()
	defer cp.procsMu.Unlock()
	var pids []int
	for _, p := range cp.procs {
		pids = append(pids, p.Pid())
	}
	return pids
}

// Names are the names of the control plane's processes, in the order they started; each logs to
// <Dir>/<name>.log.
func (cp *ControlPlane) Names() []string {
	cp.procsMu.Lock()
	defer cp.procsMu.Unlock()
	var names []string
	for _, p := range cp.procs {
		names = append(names, p.name)
	}
	return names
}

// FreePorts finds n free loopback ports (the programs bind them a moment later).
func FreePorts(n int) ([]int, error) {
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
	return WaitHTTP(ctx, client, url, timeout, nil)
}

// WaitHTTP polls url with client until it answers 200, for at most timeout; when p is not nil, p
// exiting ends the wait at once with its error.
func WaitHTTP(ctx context.Context, client *http.Client, url string, timeout time.Duration, p *Process) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if p != nil && !p.Running() {
			return false, fmt.Errorf("%s exited: %v", p.Name(), p.Err())
		}
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
