package gitops

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/e2e/sandbox/controlplane"
	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
	"github.com/gpuctl/gpuctl/internal/kube"
)

// Flux is the value of the façade's Options.GitOps that runs Flux.
const Flux = "flux"

// FluxNamespace is the namespace Flux's own objects live in, as `flux install` makes it.
const FluxNamespace = "flux-system"

// startTimeout bounds how long each program may take to answer its first health check.
const startTimeout = time.Minute

// Config is what Start needs of a running sandbox.
type Config struct {
	// Dir is the sandbox's state directory: logs (<name>.log) and the programs' storage go there.
	Dir string
	// Kubeconfig is the admin kubeconfig's path; Config the same as a client config.
	Kubeconfig string
	Config     *rest.Config
	// Spawner starts the processes (they die with the sandbox).
	Spawner *controlplane.Spawner
	// Registry is the registry executable (toolchain.EnsureRegistry).
	Registry string
	// Flux are Flux's controllers; nil: Flux is not run.
	Flux *toolchain.Flux
	// Step reports progress (nil: none).
	Step func(format string, args ...any)
}

// GitOps is the running registry and, if asked for, Flux.
type GitOps struct {
	// RegistryHost is the registry's host:port ("127.0.0.1:PORT"), plain HTTP, no auth: charts are
	// pushed to oci://RegistryHost/REPO.
	RegistryHost string
	// FluxNamespace is FluxNamespace once Flux's controllers answer their readiness checks, "" when
	// Flux is not run.
	FluxNamespace string
	// ArtifactHost is source-controller's artifact server ("127.0.0.1:PORT"; "" without Flux).
	ArtifactHost string

	procs []*controlplane.Process
}

// Start runs the registry and, when cfg.Flux is set, registers Flux's CRDs, creates FluxNamespace
// and runs source-controller and helm-controller. It returns once each answers its health check. On
// error it stops what it started.
func Start(ctx context.Context, cfg Config) (_ *GitOps, err error) {
	if cfg.Step == nil {
		cfg.Step = func(string, ...any) {}
	}
	g := &GitOps{}
	defer func() {
		if err != nil {
			g.Stop()
		}
	}()
	if err := g.startRegistry(ctx, cfg); err != nil {
		return nil, err
	}
	if cfg.Flux == nil {
		return g, nil
	}
	if err := g.startFlux(ctx, cfg); err != nil {
		return nil, err
	}
	return g, nil
}

// startRegistry runs the distribution registry with filesystem storage under Dir.
func (g *GitOps) startRegistry(ctx context.Context, cfg Config) error {
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		return err
	}
	g.RegistryHost = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	dir := filepath.Join(cfg.Dir, "registry")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return err
	}
	// The registry's configuration format: docs/content/about/configuration.md of
	// github.com/distribution/distribution at v3.1.2.
	conf := map[string]any{
		"version": "0.1",
		"log":     map[string]any{"level": "info"},
		"storage": map[string]any{
			"filesystem": map[string]any{"rootdirectory": filepath.Join(dir, "data")},
			"delete":     map[string]any{"enabled": true},
		},
		"http": map[string]any{"addr": g.RegistryHost},
	}
	b, err := yaml.Marshal(conf)
	if err != nil {
		return err
	}
	confPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(confPath, b, 0o644); err != nil {
		return err
	}
	cfg.Step("starting the OCI registry (distribution %s) on %s", toolchain.RegistryVersion, g.RegistryHost)
	// No OpenTelemetry exporter: the registry would otherwise try to send traces to localhost:4318.
	env := append(os.Environ(), "OTEL_TRACES_EXPORTER=none")
	if err := g.run(cfg, "registry", cfg.Registry, []string{"serve", confPath}, env); err != nil {
		return err
	}
	return waitHTTP(ctx, g.procs[len(g.procs)-1], "http://"+g.RegistryHost+"/v2/")
}

// startFlux registers Flux's CRDs, creates FluxNamespace and runs source-controller and
// helm-controller.
func (g *GitOps) startFlux(ctx context.Context, cfg Config) error {
	cfg.Step("registering Flux's CRDs (source-controller %s, helm-controller %s)", toolchain.FluxSourceControllerVersion, toolchain.FluxHelmControllerVersion)
	if err := applyCRDs(ctx, cfg.Config, cfg.Flux.CRDs); err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg.Config)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: FluxNamespace}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", FluxNamespace, err)
	}
	ports, err := controlplane.FreePorts(3)
	if err != nil {
		return err
	}
	g.ArtifactHost = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	storage := filepath.Join(cfg.Dir, "flux", "source-controller")
	if err := os.MkdirAll(storage, 0o755); err != nil {
		return err
	}
	// Both controllers read the kubeconfig from $KUBECONFIG (controller-runtime's GetConfig): their
	// flags are pflag's, which do not carry controller-runtime's --kubeconfig. RUNTIME_NAMESPACE is
	// the namespace a controller's Deployment would run in.
	env := append(os.Environ(), "KUBECONFIG="+cfg.Kubeconfig, "RUNTIME_NAMESPACE="+FluxNamespace)
	// Flags common to both (fluxcd/pkg/runtime's options, controller-runtime's manager): metrics off,
	// health on a loopback port, no leader election, every namespace, a short shutdown.
	common := func(healthPort int) []string {
		return []string{
			"--metrics-addr=0",
			"--health-addr=" + net.JoinHostPort("127.0.0.1", strconv.Itoa(healthPort)),
			"--enable-leader-election=false",
			"--watch-all-namespaces=true",
			"--log-encoding=console",
			"--log-level=info",
		}
	}
	controllers := []struct {
		name, bin string
		health    int
		args      []string
	}{
		{"source-controller", cfg.Flux.SourceController, ports[1], []string{
			"--storage-path=" + storage,
			"--storage-addr=" + g.ArtifactHost,
			"--storage-adv-addr=" + g.ArtifactHost,
		}},
		{"helm-controller", cfg.Flux.HelmController, ports[2], []string{"--graceful-shutdown-timeout=5s"}},
	}
	for _, c := range controllers {
		cfg.Step("starting Flux's %s", c.name)
		if err := g.run(cfg, c.name, c.bin, append(common(c.health), c.args...), env); err != nil {
			return err
		}
	}
	for i, c := range controllers {
		url := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(c.health)) + "/readyz"
		if err := waitHTTP(ctx, g.procs[len(g.procs)-len(controllers)+i], url); err != nil {
			return err
		}
	}
	g.FluxNamespace = FluxNamespace
	return nil
}

func (g *GitOps) run(cfg Config, name, bin string, args, env []string) error {
	p, err := cfg.Spawner.Start(name, bin, args, env, cfg.Dir, filepath.Join(cfg.Dir, name+".log"), 0)
	if err != nil {
		return err
	}
	g.procs = append(g.procs, p)
	return nil
}

// Stop ends the processes, the last started first, and waits for them. Safe on a nil GitOps.
func (g *GitOps) Stop() {
	if g == nil {
		return
	}
	for i := len(g.procs) - 1; i >= 0; i-- {
		g.procs[i].Stop(10 * time.Second)
	}
}

// PIDs are the process IDs of the running programs.
func (g *GitOps) PIDs() []int {
	if g == nil {
		return nil
	}
	var pids []int
	for _, p := range g.procs {
		pids = append(pids, p.Pid())
	}
	return pids
}

// LogNames are the names of every program Start may run, whose logs are <Dir>/<name>.log: what a
// failing start-up left is worth reading even when Start stopped it again.
func LogNames() []string { return []string{"registry", "source-controller", "helm-controller"} }

// applyCRDs creates the CRDs of every *.yaml file in dirs (or leaves one that exists) and waits until
// each is Established.
func applyCRDs(ctx context.Context, cfg *rest.Config, dirs []string) error {
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var names []string
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return err
		}
		if len(files) == 0 {
			return fmt.Errorf("no CRDs in %s", dir)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if err := yaml.UnmarshalStrict(b, &crd); err != nil {
				return fmt.Errorf("read CRD %s: %w", f, err)
			}
			if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("register CRD %s: %w", crd.Name, err)
			}
			names = append(names, crd.Name)
		}
	}
	for _, name := range names {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := kube.WaitCRDEstablished(ctx, ext, name)
		cancel()
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", name, err)
		}
	}
	return nil
}

// waitHTTP polls url until it answers 200, failing early when p exits.
func waitHTTP(ctx context.Context, p *controlplane.Process, url string) error {
	if err := controlplane.WaitHTTP(ctx, http.DefaultClient, url, startTimeout, p); err != nil {
		return fmt.Errorf("%s did not become ready: %w", p.Name(), err)
	}
	return nil
}
