package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/charts"
	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/e2e/upstream"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
)

// The e2e package's shared helpers, in one place. A helper only one test uses stays beside that test.

// --- Running gpuctl -------------------------------------------------------------------------------

// gpuctl runs the real command line in-process against a sandbox and returns its exit code, stdout
// and stderr.
func gpuctl(t *testing.T, c *sandbox.Cluster, args ...string) (int, string, string) {
	t.Helper()
	return gpuctlEnv(t, c, nil, args...)
}

// gpuctlEnv is gpuctl with an environment (GPUCTL_* settings, secrets in variables).
func gpuctlEnv(t *testing.T, c *sandbox.Cluster, environ map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append([]string{"--kubeconfig", c.Kubeconfig, "--progress", "plain"}, args...)
	env := func(k string) string { return environ[k] }
	code := cli.Run(context.Background(), cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut}, args, env)
	t.Logf("gpuctl %s → exit %d\n%s", strings.Join(args[4:], " "), code, errOut.String())
	return code, out.String(), errOut.String()
}

// gpuctlBinary builds cmd/gpuctl once per test binary: signals are only honest against a real
// process (its signal handling in main, and a SIGKILL that leaves no chance to clean up).
var gpuctlBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "gpuctl-e2e-bin-")
	if err != nil {
		return "", err
	}
	root, err := upstream.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "gpuctl")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gpuctl")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/gpuctl: %v\n%s", err, out)
	}
	return bin, nil
})

// installJSON runs gpuctl install -o json with args and decodes its result; it fails the test unless
// the install succeeded.
func installJSON(t *testing.T, c *sandbox.Cluster, args ...string) (engine.InstallResult, string) {
	t.Helper()
	code, stdout, stderr := gpuctl(t, c, append([]string{"install", "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("gpuctl install %v exited %d:\n%s", args, code, stderr)
	}
	var res engine.InstallResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("install -o json: %v\n%s", err, stdout)
	}
	return res, stderr
}

// assertRerunChangesNothing runs gpuctl install -o json again with args and fails the test unless it
// succeeds without changing anything; it returns the result for further checks.
func assertRerunChangesNothing(t *testing.T, c *sandbox.Cluster, env map[string]string, args ...string) engine.InstallResult {
	t.Helper()
	code, stdout, stderr := gpuctlEnv(t, c, env, append([]string{"install", "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("the rerun exited %d:\n%s", code, stderr)
	}
	var again engine.InstallResult
	if err := json.Unmarshal([]byte(stdout), &again); err != nil {
		t.Fatal(err)
	}
	if again.Changed {
		t.Errorf("the rerun changed something: %+v", again.Steps)
	}
	return again
}

func uninstallJSON(t *testing.T, c *sandbox.Cluster, args ...string) (int, engine.UninstallResult, string) {
	t.Helper()
	code, stdout, stderr := gpuctl(t, c, append([]string{"uninstall", "-o", "json"}, args...)...)
	var res engine.UninstallResult
	if stdout != "" {
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("uninstall -o json: %v\n%s", err, stdout)
		}
	}
	return code, res, stderr
}

// statusJSON runs gpuctl status -o json and returns its exit code and decoded result.
// healthyWait are status's flags for a test that expects a healthy stack right after a write: status
// --wait, as a pipeline gates on health, so a moment in which NVIDIA's controller retries a reconcile
// (assertReconciled says when) is not read as the stack's state.
func healthyWait() []string { return []string{"--wait", "--timeout", "2m"} }

func statusJSON(t *testing.T, c *sandbox.Cluster, args ...string) (int, engine.StatusResult) {
	t.Helper()
	code, stdout, _ := gpuctl(t, c, append([]string{"status", "-o", "json"}, args...)...)
	var res engine.StatusResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, stdout)
	}
	return code, res
}

// upgradeJSON runs gpuctl upgrade -o json with args and decodes its result; it fails the test unless
// the upgrade succeeded.
func upgradeJSON(t *testing.T, c *sandbox.Cluster, args ...string) engine.UpgradeResult {
	t.Helper()
	code, stdout, stderr := gpuctl(t, c, append([]string{"upgrade", "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("gpuctl upgrade %v exited %d:\n%s", args, code, stderr)
	}
	var res engine.UpgradeResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("upgrade -o json: %v\n%s", err, stdout)
	}
	return res
}

// runUntil runs gpuctl as a process with JSON progress; at the first event match accepts it calls
// while with the process's PID, then interrupts it (SIGINT) and returns its exit code and stderr.
func runUntil(t *testing.T, bin string, args []string, match func(event.Event) bool, while func(pid int)) (int, string) {
	t.Helper()
	return signalAt(t, bin, args, match, while, syscall.SIGINT)
}

// signalAt is runUntil with the signal to send (SIGKILL: a run that cannot clean up).
func signalAt(t *testing.T, bin string, args []string, match func(event.Event) bool, while func(pid int), sig syscall.Signal) (int, string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, append([]string{"--progress", "json"}, args...)...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	sent := false
	sc := bufio.NewScanner(errPipe)
	for sc.Scan() {
		line := sc.Text()
		stderr.WriteString(line + "\n")
		var ev event.Event
		if sent || json.Unmarshal([]byte(line), &ev) != nil || !match(ev) {
			continue
		}
		if while != nil {
			while(cmd.Process.Pid)
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatalf("signal %s: %v", sig, err)
		}
		sent = true
	}
	err = cmd.Wait()
	code := 0
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("gpuctl %v: %v", args, err)
	}
	t.Logf("gpuctl %v → exit %d\n%s", args, code, stderr.String())
	if !sent {
		t.Fatalf("no progress event matched")
	}
	return code, stderr.String()
}

// --- Helm ------------------------------------------------------------------------------------------

// helmCLI is Helm's own command line at the version gpuctl's go.mod requires, and helm3CLI Helm
// v3's at the version e2e/tools/helm3 pins (both built ahead of the tests by `sandbox tools`; a cache
// hit here).
var (
	helmCLI = sync.OnceValues(func() (string, error) {
		return sandbox.EnsureHelmCLI(context.Background(), nil)
	})
	helm3CLI = sync.OnceValues(func() (string, error) {
		return sandbox.EnsureHelm3CLI(context.Background(), nil)
	})
)

// helm runs Helm's (v4) CLI against the sandbox and returns its exit code and combined output.
func helm(t *testing.T, c *sandbox.Cluster, args ...string) (int, string) {
	t.Helper()
	bin, err := helmCLI()
	if err != nil {
		t.Fatal(err)
	}
	return helmBin(t, c, bin, args...)
}

// helmBin runs the Helm CLI bin against the sandbox and returns its exit code and combined output.
func helmBin(t *testing.T, c *sandbox.Cluster, bin string, args ...string) (int, string) {
	t.Helper()
	cmd := helmCommand(t, c, bin, args...)
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("helm %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	t.Logf("%s %s → exit %d\n%s", filepath.Base(filepath.Dir(bin)), strings.Join(args, " "), code, out)
	return code, string(out)
}

// helmCommand is the Helm CLI bin with args against the sandbox, with a Helm home of its own.
func helmCommand(t *testing.T, c *sandbox.Cluster, bin string, args ...string) *exec.Cmd {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "HELM_CACHE_HOME="+home+"/cache",
		"HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	return cmd
}

// chartDir is gpuctl's chart copied out of the binary, as a person would check it out.
func chartDir(t *testing.T, chart string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, charts.FS); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, chart)
}

// helmInstall is `helm install RELEASE ./charts/CHART -n NS --create-namespace`: the chart copied out
// of the binary to a directory, as a person would check it out, installed with Helm's SDK alone.
func helmInstall(t *testing.T, c *sandbox.Cluster, ns, releaseName, chart string) {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &c.Kubeconfig
	flags.Namespace = &ns
	cfg := action.NewConfiguration()
	if err := cfg.Init(flags, ns, "secret"); err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(chartDir(t, chart))
	if err != nil {
		t.Fatalf("helm cannot load %s from a directory: %v", chart, err)
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = releaseName, ns, true
	in.Timeout = time.Minute
	in.WaitStrategy = kube.HookOnlyStrategy // `helm install` without --wait
	if _, err := in.RunWithContext(t.Context(), ch, nil); err != nil {
		t.Fatalf("helm install %s: %v", releaseName, err)
	}
}

// releaseHistory is every revision of a release in the gpu-operator namespace, oldest first.
func releaseHistory(t *testing.T, c *sandbox.Cluster, name string) []*release.Release {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &c.Kubeconfig
	rc, err := release.New(flags, "gpu-operator", nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := rc.History(name)
	if err != nil {
		t.Fatalf("history of %s: %v", name, err)
	}
	return h
}

// helmRelease reads a release of the gpu-operator namespace through Helm's storage.
func helmRelease(t *testing.T, c *sandbox.Cluster, name string) *release.Release {
	t.Helper()
	h := releaseHistory(t, c, name)
	if len(h) == 0 {
		t.Fatalf("release %s: not found", name)
	}
	return h[len(h)-1]
}

// history is the Helm history of a release in the gpu-operator namespace: "1:superseded 2:deployed".
func history(t *testing.T, c *sandbox.Cluster, name string) string {
	t.Helper()
	h := releaseHistory(t, c, name)
	var out []string
	for _, r := range h {
		out = append(out, fmt.Sprintf("%d:%s", r.Revision, r.Status))
	}
	return strings.Join(out, " ")
}

// --- Sandboxes -------------------------------------------------------------------------------------

// TestMain stops the sandboxes tests shared once every test has run.
func TestMain(m *testing.M) {
	defer sandboxes.stop()
	m.Run()
}

// sandboxes are the sandboxes tests share, by their options: a sandbox's start costs 30 to 60 seconds
// of two cores, a reset (uninstall --purge) a few. A test has a shared sandbox to itself from
// cleanSandbox to its end; tests that run in parallel get one each, started when none is free.
var sandboxes = &sandboxPool{idle: map[string][]*sharedSandbox{}}

type sandboxPool struct {
	mu   sync.Mutex
	idle map[string][]*sharedSandbox // free for the next test, by options
	all  []*sharedSandbox            // every one started and not stopped
}

// take hands out a free sandbox of key, or nil.
func (p *sandboxPool) take(key string) *sharedSandbox {
	p.mu.Lock()
	defer p.mu.Unlock()
	free := p.idle[key]
	if len(free) == 0 {
		return nil
	}
	s := free[len(free)-1]
	p.idle[key] = free[:len(free)-1]
	return s
}

func (p *sandboxPool) add(s *sharedSandbox) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.all = append(p.all, s)
}

func (p *sandboxPool) put(key string, s *sharedSandbox) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle[key] = append(p.idle[key], s)
}

// discard stops s for good.
func (p *sandboxPool) discard(s *sharedSandbox) {
	s.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.all = slices.DeleteFunc(p.all, func(o *sharedSandbox) bool { return o == s })
}

func (p *sandboxPool) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.all {
		s.Stop()
	}
	p.all, p.idle = nil, nil
}

// A sharedSandbox is a sandbox and what it was like when it started: what a test compares an
// uninstall --purge with, and what the next test gets back.
type sharedSandbox struct {
	*sandbox.Cluster
	// state and nodes are clusterState and nodesMetadata right after the start.
	state map[string]string
	nodes map[string]nodeMetadata
}

// cleanSandbox gives the test a shared sandbox for opts, to itself until it ends, as it was when it
// started: nothing of gpuctl's installed, and no order among the tests that share it. A sandbox an
// earlier test left with something installed is reset with gpuctl uninstall --purge; one that cannot
// be reset exactly is stopped and replaced. opts.Progress is not used (a shared sandbox outlives the
// test that starts it, so its progress cannot go to that test's log).
func cleanSandbox(t *testing.T, opts sandbox.Options) *sharedSandbox {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real Kubernetes control plane; skipped in -short mode")
	}
	opts.Progress = nil
	key := fmt.Sprintf("%+v", opts)
	s := sandboxes.take(key)
	if s != nil {
		if why := s.reset(t); why != "" {
			t.Logf("the shared sandbox is not as it started (%s): starting a new one", why)
			sandboxes.discard(s)
			s = nil
		}
	}
	if s == nil {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute) // a cold tool cache builds Kubernetes first
		defer cancel()
		c, err := sandbox.Start(ctx, opts)
		if err != nil {
			t.Fatalf("start sandbox: %v", err)
		}
		s = &sharedSandbox{Cluster: c, state: clusterState(t, c), nodes: nodesMetadata(t, c)}
		sandboxes.add(s)
		t.Logf("started a shared %s sandbox in %s", opts.Distro, time.Since(start).Round(time.Second))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sandbox logs (%s):\n%s", s.Dir, s.LogTails(80))
		}
		sandboxes.put(key, s)
	})
	return s
}

// reset uninstalls with --purge whatever the last test left, and says why the sandbox is still not
// as it started ("" when it is).
func (s *sharedSandbox) reset(t *testing.T) string {
	t.Helper()
	rec, err := record.Read(t.Context(), s.Kube)
	if err != nil {
		return fmt.Sprintf("install record: %v", err)
	}
	if rec == nil && s.unchanged(t) {
		return ""
	}
	args := []string{"uninstall", "--yes", "--purge"}
	if rec == nil {
		// A test that deleted the record leaves releases only --adopt lets uninstall take (the
		// sandbox's, every one of them a test's).
		args = append(args, "--adopt")
	}
	if code, _, stderr := gpuctl(t, s.Cluster, args...); code != 0 {
		return fmt.Sprintf("uninstall --purge exited %d: %s", code, stderr)
	}
	if !s.unchanged(t) {
		return "uninstall --purge left changes"
	}
	return ""
}

// unchanged: the cluster's state and its nodes are as they were when the sandbox started.
func (s *sharedSandbox) unchanged(t *testing.T) bool {
	t.Helper()
	return maps.Equal(s.state, clusterState(t, s.Cluster)) && reflect.DeepEqual(s.nodes, nodesMetadata(t, s.Cluster))
}

// simulatedGPUNodes names the sandbox's nodes that have GPUs, sorted.
func simulatedGPUNodes(c *sandbox.Cluster) []string {
	var out []string
	for _, n := range c.Nodes {
		if n.Hardware.GPUs > 0 {
			out = append(out, n.Node.Name)
		}
	}
	sort.Strings(out)
	return out
}

const testNGCKey = "nvapi-e2e-secret-0123456789"

// nvaieInputs writes an NLS token and an empty gridd.conf and returns the environment a CI job would
// set: the files through GPUCTL_* variables, the NGC key in NGC_API_KEY — no secret on a command line.
func nvaieInputs(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	token, gridd := filepath.Join(dir, "client_configuration_token.tok"), filepath.Join(dir, "gridd.conf")
	if err := os.WriteFile(token, []byte("nls-token-e2e"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gridd, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"GPUCTL_NLS_TOKEN_FILE": token, "GPUCTL_GRIDD_CONF_FILE": gridd, "NGC_API_KEY": testNGCKey}
}

// terminal is a tmux session on a private server running one command at 80x24: what a person sees.
type terminal struct {
	t      *testing.T
	socket string
	// captures keeps each screen the test looked at, for the docs (GPUCTL_WIZARD_CAPTURES).
	captures []string
}

func newTerminal(t *testing.T, env []string, command ...string) *terminal {
	t.Helper()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("GPUCTL_REQUIRE_GPU_OPERATOR_SOURCES") != "" || os.Getenv("CI") != "" {
			t.Fatalf("tmux is needed for the wizard's terminal test (apt-get install tmux): %v", err)
		}
		t.Skipf("tmux not installed: %v", err)
	}
	term := &terminal{t: t, socket: fmt.Sprintf("gpuctl-wizard-%d", os.Getpid())}
	// env -i: the wizard sees only what a person's shell would give it, and no CI variable.
	args := append([]string{"-L", term.socket, "-f", "/dev/null", "new-session", "-d", "-s", "wizard", "-x", "80", "-y", "24",
		"env", "-i"}, env...)
	args = append(args, command...)
	if out, err := exec.Command(tmux, args...).CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(tmux, "-L", term.socket, "kill-server").Run() })
	return term
}

func (term *terminal) tmux(args ...string) string {
	term.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", term.socket}, args...)...).CombinedOutput()
	if err != nil {
		term.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (term *terminal) screen() string { return term.tmux("capture-pane", "-p", "-J", "-t", "wizard") }

func (term *terminal) keys(keys ...string) {
	term.t.Helper()
	term.tmux(append([]string{"send-keys", "-t", "wizard"}, keys...)...)
}

// waitFor polls the screen until it shows every part, and returns it.
func (term *terminal) waitFor(timeout time.Duration, parts ...string) string {
	term.t.Helper()
	var s, missing string
	ctx, cancel := context.WithTimeout(term.t.Context(), timeout)
	defer cancel()
	_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		s, missing = term.screen(), ""
		for _, p := range parts {
			if !strings.Contains(s, p) {
				missing = p
				break
			}
		}
		return missing == "", nil
	})
	if missing != "" {
		term.t.Fatalf("after %s the screen does not show %q:\n%s", timeout, missing, s)
	}
	term.captures = append(term.captures, s)
	return s
}

// --- Reading the cluster ---------------------------------------------------------------------------

var clusterPolicies = schema.GroupVersionResource{Group: "nvidia.com", Version: "v1", Resource: "clusterpolicies"}

func dynamicClient(t *testing.T, c *sandbox.Cluster) dynamic.Interface {
	t.Helper()
	return dynamic.NewForConfigOrDie(c.Config)
}

// clusterState fingerprints what gpuctl could change: every object of the kinds it writes, by
// resourceVersion, and the nodes' labels, annotations and taints (their resourceVersions move with
// every kwok heartbeat, so they are compared by content).
func clusterState(t *testing.T, c *sandbox.Cluster) map[string]string {
	t.Helper()
	ctx := t.Context()
	dyn := dynamicClient(t, c)
	state := map[string]string{}
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "namespaces"},
		{Version: "v1", Resource: "secrets"},
		{Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "serviceaccounts"},
		{Version: "v1", Resource: "resourcequotas"},
		{Group: "apps", Version: "v1", Resource: "deployments"},
		{Group: "apps", Version: "v1", Resource: "daemonsets"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
		{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	} {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list %s: %v", gvr.Resource, err)
		}
		for _, o := range list.Items {
			// Token controllers and the like touch kube-system; gpuctl never does.
			if o.GetNamespace() == "kube-system" || o.GetNamespace() == "kube-node-lease" {
				continue
			}
			// The controller manager's root CA publisher writes this one into every namespace, in its
			// own time after the sandbox starts (kube-public's once appeared between two snapshots);
			// gpuctl never writes it.
			if gvr.Resource == "configmaps" && o.GetName() == "kube-root-ca.crt" {
				continue
			}
			// Likewise the controller manager's service account controller creates each namespace's
			// "default" ServiceAccount in its own time (a TKGS sandbox's vmware-system-* once got theirs
			// between two snapshots); gpuctl never writes it.
			if gvr.Resource == "serviceaccounts" && o.GetName() == "default" {
				continue
			}
			state[gvr.Resource+"/"+o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		annotations := maps.Clone(n.Annotations)
		delete(annotations, "node.alpha.kubernetes.io/ttl")
		state["node/"+n.Name] = fmt.Sprint(n.Labels, annotations, n.Spec.Taints)
	}
	return state
}

// writableState is clusterState and what it leaves out that gpuctl writes too: kube-system, where
// gpuctl keeps its lock's Lease and its install record, and Leases, Roles and RoleBindings everywhere.
// The control plane changes some of these by itself (leader election and the API server renew their
// Leases, kwok its nodes', the controller manager adds service accounts), so an object that only the
// control plane's own components ever wrote is left out: whatever gpuctl writes carries a field
// manager of its own (gpuctl, helm).
func writableState(t *testing.T, c *sandbox.Cluster) map[string]string {
	t.Helper()
	state := clusterState(t, c)
	dyn := dynamicClient(t, c)
	for _, r := range []struct {
		gvr schema.GroupVersionResource
		ns  string // "" = every namespace
	}{
		{schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, ""},
		{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, ""},
		{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, ""},
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "kube-system"},
		{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "kube-system"},
		{schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, "kube-system"},
	} {
		list, err := dyn.Resource(r.gvr).Namespace(r.ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list %s: %v", r.gvr.Resource, err)
		}
		for _, o := range list.Items {
			if controlPlaneOnly(o.GetManagedFields()) || (r.gvr.Resource == "configmaps" && o.GetName() == "kube-root-ca.crt") {
				continue
			}
			state[r.gvr.Resource+"/"+o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	return state
}

// controlPlaneOnly: every writer of the object is a component of the sandbox's control plane (field
// managers are the components' user agents).
func controlPlaneOnly(managers []metav1.ManagedFieldsEntry) bool {
	for _, m := range managers {
		switch m.Manager {
		case "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok":
		default:
			return false
		}
	}
	return len(managers) > 0
}

func assertUnchanged(t *testing.T, before, after map[string]string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if b, ok := before[k]; !ok {
			t.Errorf("created: %s", k)
		} else if b != after[k] {
			t.Errorf("changed: %s", k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			t.Errorf("deleted: %s", k)
		}
	}
}

// nodeMetadata is every node's full label map and taints (timeAdded aside): what uninstall must give
// back byte for byte.
type nodeMetadata struct {
	Labels map[string]string
	Taints []corev1.Taint
}

func nodesMetadata(t *testing.T, c *sandbox.Cluster) map[string]nodeMetadata {
	t.Helper()
	nodes, err := c.Kube.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	taints := taintsByNode(t, c)
	out := map[string]nodeMetadata{}
	for _, n := range nodes.Items {
		out[n.Name] = nodeMetadata{Labels: maps.Clone(n.Labels), Taints: taints[n.Name]}
	}
	return out
}

func taintsByNode(t *testing.T, c *sandbox.Cluster) map[string][]corev1.Taint {
	t.Helper()
	nodes, err := c.Kube.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]corev1.Taint{}
	for _, n := range nodes.Items {
		var ts []corev1.Taint
		for _, taint := range n.Spec.Taints {
			taint.TimeAdded = nil
			ts = append(ts, taint)
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].Key+string(ts[i].Effect) < ts[j].Key+string(ts[j].Effect) })
		out[n.Name] = ts
	}
	return out
}

// crdNames are the names of every CRD in the cluster, sorted.
func crdNames(t *testing.T, c *sandbox.Cluster) []string {
	t.Helper()
	list, err := dynamicClient(t, c).Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range list.Items {
		out = append(out, o.GetName())
	}
	sort.Strings(out)
	return out
}

func clusterPolicyUID(t *testing.T, c *sandbox.Cluster) types.UID {
	t.Helper()
	cp, err := dynamicClient(t, c).Resource(clusterPolicies).Get(t.Context(), "cluster-policy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cp.GetUID()
}

// assertReconciled checks the real operator's verdict on the ClusterPolicy.
func assertReconciled(t *testing.T, c *sandbox.Cluster, name string) {
	t.Helper()
	// NVIDIA's controller may report a failed reconcile for a moment after install's wait saw it
	// Reconciled: a reconcile that loses a race to update a Node (its init labels the GPU nodes while
	// the device plugin and MIG manager write them too) sets Ready False, reason Error, and is retried
	// at once (controllers/clusterpolicy_controller.go at v25.10.1, Reconcile). So this waits for
	// Reconciled, and fails on a ClusterPolicy that does not get there within a minute.
	policies := dynamicClient(t, c).Resource(clusterPolicies)
	waitUntil(t, time.Minute, "ClusterPolicy "+name+" is ready and Reconciled", func(ctx context.Context) (bool, error) {
		cp, err := policies.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		state, _, _ := unstructured.NestedString(cp.Object, "status", "state")
		conds, _, _ := unstructured.NestedSlice(cp.Object, "status", "conditions")
		for _, cnd := range conds {
			if m, _ := cnd.(map[string]any); m["type"] == "Ready" && m["reason"] == "Reconciled" && m["status"] == "True" && state == "ready" {
				return true, nil
			}
		}
		return false, fmt.Errorf("state %q, conditions %v", state, conds)
	})
}

// assertRealController checks that the controller the sandbox ran for this install is NVIDIA's
// controller of release, built from that release's sources, and that it never exited on its own
// (a missing CRD makes the real controller exit with status 1 every two minutes).
func assertRealController(t *testing.T, c *sandbox.Cluster, release string) {
	t.Helper()
	runs := c.OperatorRuns()
	if len(runs) == 0 {
		t.Fatal("the real GPU operator controller never ran")
	}
	for _, r := range runs {
		if r.Release != release || !r.FromSources {
			t.Errorf("controller run %+v: want release %s built from NVIDIA's sources", r, release)
		}
		if r.ExitErr != "" {
			t.Errorf("controller of %s exited during the test: %s", r.Release, r.ExitErr)
		}
	}
}

// verifyPodUIDs are the verify pods in the cluster, by name.
func verifyPodUIDs(t *testing.T, c *sandbox.Cluster) map[string]types.UID {
	t.Helper()
	pods, err := c.Kube.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{LabelSelector: engine.VerifyNameLabel + "=" + plan.VerifyName})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, p := range pods.Items {
		out[p.Name] = p.UID
	}
	return out
}

// verifyPodNames are the names of the verify pods in the cluster, sorted.
func verifyPodNames(t *testing.T, c *sandbox.Cluster) []string {
	t.Helper()
	return slices.Sorted(maps.Keys(verifyPodUIDs(t, c)))
}

func assertNoVerifyPods(t *testing.T, c *sandbox.Cluster) {
	t.Helper()
	if left := verifyPodNames(t, c); len(left) > 0 {
		t.Errorf("verify left pods behind: %v", left)
	}
}

func normalize(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// createDeployment creates a one-replica Deployment in default with pods labelled app=name.
func createDeployment(t *testing.T, c *sandbox.Cluster, name string, spec corev1.PodSpec) *appsv1.Deployment {
	t.Helper()
	one := int32(1)
	sel := map[string]string{"app": name}
	d, err := c.Kube.AppsV1().Deployments("default").Create(t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: spec}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// --- Waiting ---------------------------------------------------------------------------------------

// podsReadyTimeout bounds the wait for a workload's pods once gpuctl has installed: kwok makes a
// scheduled pod Ready at once, so only an unschedulable pod takes long, and it never becomes Ready.
const podsReadyTimeout = 2 * time.Minute

// waitPodsReady watches the pods matching selector until n of them are Ready, and returns them; it fails
// the test with the pods' conditions (the scheduler's reason) if they are not Ready within
// podsReadyTimeout.
func waitPodsReady(t *testing.T, c *sandbox.Cluster, ns, selector string, n int) []corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), podsReadyTimeout)
	defer cancel()
	sel, err := labels.Parse(selector)
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]corev1.Pod{}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel.String()
			return c.Kube.CoreV1().Pods(ns).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel.String()
			return c.Kube.CoreV1().Pods(ns).Watch(ctx, o)
		},
	}
	var last []string
	_, err = watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, nil, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			return false, nil
		}
		if ev.Type != watch.Deleted && podIsReady(p) {
			ready[p.Name] = *p
		} else {
			delete(ready, p.Name)
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status != corev1.ConditionTrue {
					last = append(last, p.Name+": "+cond.Reason+": "+cond.Message)
				}
			}
		}
		return len(ready) >= n, nil
	})
	if err != nil {
		t.Fatalf("pods %s in %s not Ready: %v; last seen: %v", selector, ns, err, last)
	}
	out := make([]corev1.Pod, 0, len(ready))
	for _, p := range ready {
		out = append(out, p)
	}
	return out
}

// waitForObject watches until the named object exists; the test's deadline bounds it.
func waitForObject(t *testing.T, c *sandbox.Cluster, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	res := dynamicClient(t, c).Resource(gvr).Namespace(ns)
	for {
		list, err := res.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			t.Fatalf("list %s: %v", gvr.Resource, err)
		}
		if len(list.Items) > 0 {
			return &list.Items[0]
		}
		w, err := res.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			t.Fatalf("watch %s: %v", gvr.Resource, err)
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				w.Stop()
				u, _ := ev.Object.(*unstructured.Unstructured)
				return u
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%s %s/%s did not appear: %v", gvr.Resource, ns, name, ctx.Err())
		}
	}
}

// waitUntil polls done until it reports true, and returns as soon as it does: a wait for the state the
// test checks next, never a timed assertion. timeout (within the test's own deadline) only bounds how
// long a state that never comes is waited for; then the test fails naming what and done's last error.
func waitUntil(t *testing.T, timeout time.Duration, what string, done func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := done(ctx)
		last = err // an error is retried: the API server may be restarting, a watch catching up
		return ok && err == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting until %s: %v (last error: %v)", what, err, last)
	}
}

// breakValidators leaves the stack broken for good: the operator scaled to zero (so nothing recreates
// the validator DaemonSet), the DaemonSet deleted, and it returns once its pods are gone.
func breakValidators(t *testing.T, c *sandbox.Cluster) {
	t.Helper()
	ctx := t.Context()
	deps := c.Kube.AppsV1().Deployments("gpu-operator")
	if _, err := deps.Patch(ctx, "gpu-operator", types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	err := c.Kube.AppsV1().DaemonSets("gpu-operator").Delete(ctx, "nvidia-operator-validator", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, time.Minute, "the validator pods are gone", func(ctx context.Context) (bool, error) {
		pods, err := c.Kube.CoreV1().Pods("gpu-operator").List(ctx, metav1.ListOptions{LabelSelector: "app=nvidia-operator-validator"})
		return err == nil && len(pods.Items) == 0, err
	})
}

// --- Stories ---------------------------------------------------------------------------------------

// A step is one subtest of a story.
type step struct {
	name string
	run  func(t *testing.T)
}

// story runs steps in order as subtests of t, for a story whose steps each start where the one before
// ended (a Helm history, revision by revision). Run alone (go test -run 'TestX/later_step'), a step
// gets the steps before it run first, in t, as its set-up; steps after the last one -run selects are
// not run. A step that fails ends the story: the ones after it would start from a state it did not
// leave. A step's own subtests are not run when it is set-up.
func story(t *testing.T, steps ...step) {
	t.Helper()
	last := -1
	for i, s := range steps {
		if selected(t, s.name) {
			last = i
		}
	}
	for _, s := range steps[:last+1] {
		if !selected(t, s.name) {
			t.Logf("set-up for a later step: %s", s.name)
			s.run(t)
		} else {
			t.Run(s.name, s.run)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
}

// selected: go test's -run pattern selects t's subtest name (testing's own match: the pattern split
// at each "/" outside brackets and parentheses, one element per level, spaces in names as "_").
func selected(t *testing.T, name string) bool {
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	levels := strings.Split(t.Name()+"/"+strings.ReplaceAll(name, " ", "_"), "/")
	for i, elem := range splitPattern(f.Value.String()) {
		if i >= len(levels) {
			break
		}
		if ok, err := regexp.MatchString(elem, levels[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

// splitPattern splits a -run pattern at each "/" outside brackets and parentheses.
func splitPattern(p string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range p {
		switch r {
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case '/':
			if depth == 0 {
				out = append(out, p[start:i])
				start = i + 1
			}
		}
	}
	return append(out, p[start:])
}

func TestSplitPattern(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"^TestX$", []string{"^TestX$"}},
		{"^TestX$/^step_two", []string{"^TestX$", "^step_two"}},
		{"TestX/[a/b]/(c/d)", []string{"TestX", "[a/b]", "(c/d)"}},
	} {
		if got := splitPattern(tc.pattern); !slices.Equal(got, tc.want) {
			t.Errorf("splitPattern(%q) = %q, want %q", tc.pattern, got, tc.want)
		}
	}
}

// nfdPCILabel is the label NFD gives a node with an NVIDIA GPU under gpuctl's NFD worker config
// (sources.pci.deviceLabelFields: [vendor]).
const nfdPCILabel = "feature.node.kubernetes.io/pci-10de.present"

// assertNFDLabels checks that every node in nodes carries nfdPCILabel and that its managedFields
// record it under nfd-master, the field manager internal/uninstall recognises as NFD's. With real
// NFD (every sandbox but OpenShift's and the benches'), it also checks that the label came the real
// way: a NodeFeature for the node, written by its nfd-worker.
func assertNFDLabels(t *testing.T, c *sandbox.Cluster, nodes []string, real bool) {
	t.Helper()
	ctx := t.Context()
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	nodeFeatures := schema.GroupVersionResource{Group: "nfd.k8s-sigs.io", Version: "v1alpha1", Resource: "nodefeatures"}
	for _, name := range nodes {
		// The worker reports at start and nfd-master labels soon after; wait a little for both.
		var node *corev1.Node
		err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			n, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			node = n
			return n.Labels[nfdPCILabel] == "true", nil
		})
		if err != nil {
			t.Errorf("node %s: no %s=true: %v (labels %v)", name, nfdPCILabel, err, node.Labels)
			continue
		}
		var managers []string
		for _, mf := range node.ManagedFields {
			if mf.FieldsV1 == nil {
				continue
			}
			var fields struct {
				Metadata struct {
					Labels map[string]json.RawMessage `json:"f:labels"`
				} `json:"f:metadata"`
			}
			if json.Unmarshal(mf.FieldsV1.Raw, &fields) == nil {
				if _, ok := fields.Metadata.Labels["f:"+nfdPCILabel]; ok {
					managers = append(managers, mf.Manager)
				}
			}
		}
		if !slices.Equal(managers, []string{"nfd-master"}) {
			t.Errorf("node %s: %s is managed by %v, want [nfd-master]", name, nfdPCILabel, managers)
		}
		if !real {
			continue
		}
		list, err := dyn.Resource(nodeFeatures).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: "nfd.node.kubernetes.io/node-name=" + name})
		if err != nil {
			t.Fatalf("list NodeFeatures: %v", err)
		}
		if len(list.Items) == 0 {
			t.Errorf("node %s: no NodeFeature: its label did not come from an nfd-worker", name)
		}
	}
}
