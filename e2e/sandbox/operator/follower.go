package operator

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/gpuctl/gpuctl/e2e/sandbox/controlplane"
	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
)

// Follower makes the sandbox behave like a cluster that can run the GPU operator's image:
// whenever a GPU operator Deployment exists (whoever installed it: gpuctl, plain Helm, the OLM
// stand-in) and its pod is Running, the real operator controller runs as a local process in that
// pod's place, with OPERATOR_NAMESPACE set to the Deployment's namespace, the Deployment's own
// environment (image settings), and the credentials of the pod's service account — so RBAC mistakes
// in a chart fail here as they would on a real cluster. When the Deployment goes away, or its pod
// stops running, the controller is stopped. One controller at a time, like leader election would
// allow; a second Deployment waits until the first is gone.
type Follower struct {
	cfg     Config
	trigger chan struct{}

	deployments appslisters.DeploymentLister
	pods        corelisters.PodLister

	mu      sync.Mutex
	current *runningOperator
	// crashes counts consecutive early exits, for a kubelet-like restart back-off.
	crashes   int
	notBefore time.Time
	// runs records every controller process, oldest first (OperatorRuns).
	runs []Run
	// view is how controller processes get their release's /opt/gpu-operator, decided at the first start.
	view *operatorView
}

type runningOperator struct {
	uid       types.UID
	namespace string
	name      string
	build     toolchain.OperatorBuild
	proc      *controlplane.Process
	started   time.Time
	run       int  // index in runs
	stopping  bool // the sandbox is stopping it (its exit is no crash)
}

// Run is one run of the real controller.
type Run struct {
	Release     string // "v26.7.0"; the fallback module's version when FromSources is false
	FromSources bool   // built from NVIDIA's sources of Release
	Namespace   string
	Started     time.Time
	Exited      time.Time // zero while running
	ExitErr     string    // how it exited ("" while running or when the sandbox stopped it)
}

// Runs lists every run of the controller, oldest first. A run that ended without the follower
// stopping it (a crash, an exit of the controller's own) has its ExitErr set ("exit status 1",
// "signal: killed").
func (f *Follower) Runs() []Run {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.runs)
}

// Config is what the follower needs of the sandbox.
type Config struct {
	// Kube is an admin client: the follower mints tokens for the operator's service account.
	Kube kubernetes.Interface
	// Dir is the sandbox's state directory; the controller logs to gpu-operator.log there.
	Dir string
	// DefaultRelease is the controller to run when the Deployment's image names no release of
	// gpuctl's catalog (a digest, an unknown tag): Options.OperatorVersion.
	DefaultRelease string
	// Build returns the controller of a release and a warning about it (toolchain.Tools.Operator).
	Build func(release string) (toolchain.OperatorBuild, string, error)
	// Kubeconfig writes a kubeconfig that authenticates with a service account's token.
	Kubeconfig func(name, token string) (string, error)
	// Spawner starts the controller processes.
	Spawner *controlplane.Spawner
	// Logf writes a line to the sandbox's log.
	Logf func(format string, args ...any)
}

// Follow starts a follower on factory's Deployment and Pod informers (the caller starts the factory);
// it runs until ctx is done, counted in wg. Stop the follower's controller with Stop after that.
func Follow(ctx context.Context, factory informers.SharedInformerFactory, cfg Config, wg *sync.WaitGroup) *Follower {
	f := &Follower{
		cfg:         cfg,
		trigger:     make(chan struct{}, 1),
		deployments: factory.Apps().V1().Deployments().Lister(),
		pods:        factory.Core().V1().Pods().Lister(),
	}
	poke := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { f.poke() },
		UpdateFunc: func(any, any) { f.poke() },
		DeleteFunc: func(any) { f.poke() },
	}
	_, _ = factory.Apps().V1().Deployments().Informer().AddEventHandler(poke)
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(poke)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if !cache.WaitForCacheSync(ctx.Done(), factory.Apps().V1().Deployments().Informer().HasSynced, factory.Core().V1().Pods().Informer().HasSynced) {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-f.trigger:
				f.reconcile(ctx)
			}
		}
	}()
	return f
}

func (f *Follower) poke() {
	select {
	case f.trigger <- struct{}{}:
	default:
	}
}

// desired is the operator Deployment whose pod is Running, oldest first; nil if none.
func (f *Follower) desired() *appsv1.Deployment {
	all, err := f.deployments.List(labels.Everything())
	if err != nil {
		return nil
	}
	sort.Slice(all, func(i, j int) bool {
		return all[i].CreationTimestamp.Before(&all[j].CreationTimestamp)
	})
	for _, d := range all {
		if d.DeletionTimestamp != nil || !IsGPUOperatorDeployment(d) || d.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			continue
		}
		pods, err := f.pods.Pods(d.Namespace).List(sel)
		if err != nil {
			continue
		}
		for _, p := range pods {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				return d
			}
		}
	}
	return nil
}

func (f *Follower) reconcile(ctx context.Context) {
	want := f.desired()
	f.mu.Lock()
	cur := f.current
	f.mu.Unlock()
	var build toolchain.OperatorBuild
	var warning string
	var buildErr error
	if want != nil {
		build, warning, buildErr = f.buildFor(want)
	}
	cur = f.stopUnwanted(cur, want, build, buildErr)
	if cur != nil && !cur.proc.Running() {
		f.backOff(cur)
		return
	}
	if cur != nil || want == nil {
		return
	}
	f.mu.Lock()
	wait := time.Until(f.notBefore)
	f.mu.Unlock()
	if wait > 0 {
		time.AfterFunc(wait, f.poke)
		return
	}
	f.launch(ctx, want, build, warning, buildErr)
}

// stopUnwanted stops the running controller if its Deployment or pod is gone or the Deployment now
// names another release, and returns the controller that is left (nil if none).
func (f *Follower) stopUnwanted(cur *runningOperator, want *appsv1.Deployment, build toolchain.OperatorBuild, buildErr error) *runningOperator {
	switch {
	case cur != nil && (want == nil || want.UID != cur.uid):
		f.cfg.Logf("operator: stopping the GPU operator controller for %s/%s (its Deployment or pod is gone)", cur.namespace, cur.name)
		f.Stop()
		return nil
	case cur != nil && buildErr == nil && build.Binary != cur.build.Binary && cur.proc.Running():
		// A new image in the same Deployment: a real cluster rolls out a new pod.
		f.cfg.Logf("operator: the Deployment %s/%s now runs %s; replacing the %s controller", cur.namespace, cur.name, build.Release, cur.build.Release)
		f.Stop()
		return nil
	}
	return cur
}

// backOff forgets a controller that exited and schedules its restart with a kubelet-like back-off.
func (f *Follower) backOff(cur *runningOperator) {
	f.mu.Lock()
	f.current = nil
	if time.Since(cur.started) < time.Minute {
		f.crashes++
	} else {
		f.crashes = 0
	}
	backoff := min(time.Duration(1<<min(f.crashes, 5))*time.Second, 30*time.Second)
	f.notBefore = time.Now().Add(backoff)
	f.mu.Unlock()
	f.cfg.Logf("operator: controller %s for %s/%s exited (%v); restarting in %s", cur.build.Release, cur.namespace, cur.name, cur.proc.Err(), backoff)
	time.AfterFunc(backoff, f.poke)
}

// launch starts the controller for want and records the run; a controller that cannot start is
// retried in 5 s.
func (f *Follower) launch(ctx context.Context, want *appsv1.Deployment, build toolchain.OperatorBuild, warning string, buildErr error) {
	var proc *controlplane.Process
	err := buildErr
	if err == nil {
		if warning != "" {
			f.cfg.Logf("operator: WARNING: %s", warning)
		}
		proc, err = f.start(ctx, want, build)
	}
	if err != nil {
		f.cfg.Logf("operator: cannot run the GPU operator controller for %s/%s: %v", want.Namespace, want.Name, err)
		f.mu.Lock()
		f.crashes++
		f.notBefore = time.Now().Add(5 * time.Second)
		f.mu.Unlock()
		time.AfterFunc(5*time.Second, f.poke)
		return
	}
	now := time.Now()
	f.mu.Lock()
	run := &runningOperator{uid: want.UID, namespace: want.Namespace, name: want.Name, build: build, proc: proc, started: now, run: len(f.runs)}
	f.runs = append(f.runs, Run{Release: build.Release, FromSources: build.FromSources, Namespace: want.Namespace, Started: now})
	f.current = run
	f.mu.Unlock()
	go f.recordExit(run)
}

// recordExit waits for a run's process to exit, records how, and looks again.
func (f *Follower) recordExit(run *runningOperator) {
	<-run.proc.Exited()
	f.mu.Lock()
	r := &f.runs[run.run]
	r.Exited = time.Now()
	if !run.stopping {
		r.ExitErr = "exit status 0"
		if err := run.proc.Err(); err != nil {
			r.ExitErr = err.Error()
		}
	}
	f.mu.Unlock()
	f.poke()
}

// buildFor picks the controller for a Deployment: the release its operator container's image tag
// names, else the sandbox's default release; see Tools.Operator for missing sources.
func (f *Follower) buildFor(d *appsv1.Deployment) (toolchain.OperatorBuild, string, error) {
	image := Container(d).Image
	release, known := ImageRelease(image)
	var note string
	if !known {
		note = fmt.Sprintf("the operator image %q names no release of gpuctl's catalog; running the controller of %s", image, f.cfg.DefaultRelease)
		release = f.cfg.DefaultRelease
	}
	b, warning, err := f.cfg.Build(release)
	if note != "" {
		warning = strings.TrimPrefix(note+"; "+warning, "; ")
		warning = strings.TrimSuffix(warning, "; ")
	}
	return b, warning, err
}

func (f *Follower) start(ctx context.Context, d *appsv1.Deployment, build toolchain.OperatorBuild) (*controlplane.Process, error) {
	f.mu.Lock()
	view := f.view
	f.mu.Unlock()
	if view == nil {
		v := chooseOperatorView(build)
		if v.warning != "" {
			f.cfg.Logf("operator: WARNING: %s", v.warning)
		}
		f.mu.Lock()
		f.view = &v
		view = &v
		f.mu.Unlock()
	}
	if err := installHostEtc(); err != nil {
		return nil, err
	}
	if !view.private {
		if err := installOperatorFiles(build); err != nil {
			return nil, err
		}
	}
	sa := d.Spec.Template.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	// The pod would get a projected token of its service account; the controller gets the same.
	expiry := int64((24 * time.Hour).Seconds())
	tok, err := f.cfg.Kube.CoreV1().ServiceAccounts(d.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for service account %s/%s: %w", d.Namespace, sa, err)
	}
	kubeconfig, err := f.cfg.Kubeconfig("gpu-operator", tok.Status.Token)
	if err != nil {
		return nil, err
	}
	env := Env(d)
	env = append(env, "OPERATOR_NAMESPACE="+d.Namespace, "KUBECONFIG="+kubeconfig)
	origin := "built from NVIDIA's sources of " + build.Release
	if !build.FromSources {
		origin = "the fallback Go module github.com/NVIDIA/gpu-operator@" + build.Release + ", NOT the release installed"
	}
	files := "a private mount of " + build.Root
	if !view.private {
		files = "a shared copy of " + build.Root
	}
	logPath := filepath.Join(f.cfg.Dir, "gpu-operator.log")
	if lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		fmt.Fprintf(lf, "===== %s: running the real GPU operator controller %s (%s) for Deployment %s/%s (image %s, service account %s); /opt/gpu-operator is %s\n",
			time.Now().Format(time.RFC3339), build.Release, origin, d.Namespace, d.Name, Container(d).Image, sa, files)
		lf.Close()
	}
	f.cfg.Logf("operator: running the GPU operator controller %s (%s) for %s/%s as service account %s", build.Release, origin, d.Namespace, d.Name, sa)
	// The Deployment's own flags would bind :8080/:8081 and take a lease; on a shared machine the
	// process binds ephemeral loopback ports, and there is only ever one of it.
	args := []string{"--leader-elect=false", "--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0"}
	bin, unshare := build.Binary, uintptr(0)
	if view.private {
		bin, args, unshare = view.wrap(build.Root, append([]string{build.Binary}, args...)...)
	}
	return f.cfg.Spawner.Start("gpu-operator", bin, args, env, f.cfg.Dir, logPath, unshare)
}

// Stop stops the running controller, if any, and waits for it.
func (f *Follower) Stop() {
	f.mu.Lock()
	cur := f.current
	f.current = nil
	f.crashes = 0
	f.notBefore = time.Time{}
	if cur != nil && cur.proc.Running() {
		cur.stopping = true
	}
	f.mu.Unlock()
	if cur != nil {
		cur.proc.Stop(10 * time.Second)
	}
}

// PrivateView reports whether controller processes get their own /opt/gpu-operator (known after the
// first start).
func (f *Follower) PrivateView() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.view != nil && f.view.private
}

// PIDs is the running controller's process ID, if one runs.
func (f *Follower) PIDs() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.current == nil || !f.current.proc.Running() {
		return nil
	}
	return []int{f.current.proc.Pid()}
}

// Namespace is where the controller runs now ("" when none runs).
func (f *Follower) Namespace() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.current == nil {
		return ""
	}
	return f.current.namespace
}

// installOperatorFiles is the fallback where processes cannot have their own mount namespace (not
// root): it copies the build's files to the shared /opt/gpu-operator, replacing another release's.
// Parallel sandboxes running different releases then see whichever was copied last.
func installOperatorFiles(b toolchain.OperatorBuild) error {
	// Sandboxes of parallel test binaries share this path.
	if err := os.MkdirAll(FilesPath, 0o755); err != nil {
		return fmt.Errorf("the GPU operator reads its manifests from %s, which cannot be created (run as root): %w", FilesPath, err)
	}
	unlock, err := toolchain.LockFile(context.Background(), FilesPath+".lock", io.Discard)
	if err != nil {
		return err
	}
	defer unlock()
	want, err := os.ReadFile(filepath.Join(b.Root, toolchain.ReleaseMarker))
	if err != nil {
		return err
	}
	if have, err := os.ReadFile(filepath.Join(FilesPath, toolchain.ReleaseMarker)); err == nil && string(have) == string(want) {
		return nil
	}
	entries, err := os.ReadDir(FilesPath)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(FilesPath, e.Name())); err != nil {
			return err
		}
	}
	return toolchain.CopyTree(b.Root, FilesPath)
}

// installHostEtc puts the host's os-release where the controller reads it before v26.x
// (controllers/object_controls.go at v25.10.1): a fixed path, the same for every release.
func installHostEtc() error {
	const osRelease = "/host-etc/os-release"
	if _, err := os.Stat(osRelease); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(osRelease), 0o755); err != nil {
		return fmt.Errorf("the GPU operator reads %s, which cannot be created (run as root): %w", osRelease, err)
	}
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return err
	}
	return os.WriteFile(osRelease, b, 0o644)
}
