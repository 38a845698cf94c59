package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
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
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// operatorFollower makes the sandbox behave like a cluster that can run the GPU operator's image:
// whenever a GPU operator Deployment exists (whoever installed it: gpuctl, plain Helm, the OLM
// stand-in) and its pod is Running, the real operator controller runs as a local process in that
// pod's place, with OPERATOR_NAMESPACE set to the Deployment's namespace, the Deployment's own
// environment (image settings), and the credentials of the pod's service account — so RBAC mistakes
// in a chart fail here as they would on a real cluster. When the Deployment goes away, or its pod
// stops running, the controller is stopped. One controller at a time, like leader election would
// allow; a second Deployment waits until the first is gone.
type operatorFollower struct {
	c       *Cluster
	trigger chan struct{}

	deployments appslisters.DeploymentLister
	pods        corelisters.PodLister

	mu      sync.Mutex
	current *runningOperator
	// crashes counts consecutive early exits, for a kubelet-like restart back-off.
	crashes   int
	notBefore time.Time
}

type runningOperator struct {
	uid       types.UID
	namespace string
	name      string
	proc      *process
	started   time.Time
}

// isGPUOperatorDeployment recognises the operator by its label (NVIDIA's chart and ours set
// app: gpu-operator — research §3) or by its image (nvcr.io/nvidia/gpu-operator), whatever the
// namespace or release name.
func isGPUOperatorDeployment(d *appsv1.Deployment) bool {
	if d.Labels["app"] == "gpu-operator" || d.Spec.Template.Labels["app"] == "gpu-operator" {
		return true
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if imageName(c.Image) == "gpu-operator" {
			return true
		}
	}
	return false
}

// imageName is the last path element of an image reference without tag or digest.
func imageName(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	name := path.Base(image)
	if i := strings.Index(name, ":"); i >= 0 {
		name = name[:i]
	}
	return name
}

func (c *Cluster) startOperatorFollower(ctx context.Context, factory informers.SharedInformerFactory) {
	f := &operatorFollower{
		c:           c,
		trigger:     make(chan struct{}, 1),
		deployments: factory.Apps().V1().Deployments().Lister(),
		pods:        factory.Core().V1().Pods().Lister(),
	}
	c.operator = f
	poke := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { f.poke() },
		UpdateFunc: func(any, any) { f.poke() },
		DeleteFunc: func(any) { f.poke() },
	}
	_, _ = factory.Apps().V1().Deployments().Informer().AddEventHandler(poke)
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(poke)
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
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
}

func (f *operatorFollower) poke() {
	select {
	case f.trigger <- struct{}{}:
	default:
	}
}

// desired is the operator Deployment whose pod is Running, oldest first; nil if none.
func (f *operatorFollower) desired() *appsv1.Deployment {
	all, err := f.deployments.List(labels.Everything())
	if err != nil {
		return nil
	}
	sort.Slice(all, func(i, j int) bool {
		return all[i].CreationTimestamp.Before(&all[j].CreationTimestamp)
	})
	for _, d := range all {
		if d.DeletionTimestamp != nil || !isGPUOperatorDeployment(d) || d.Spec.Selector == nil {
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

func (f *operatorFollower) reconcile(ctx context.Context) {
	want := f.desired()
	f.mu.Lock()
	cur := f.current
	f.mu.Unlock()
	if cur != nil && (want == nil || want.UID != cur.uid) {
		f.c.logf("operator: stopping the GPU operator controller for %s/%s (its Deployment or pod is gone)", cur.namespace, cur.name)
		f.stopProcess()
		cur = nil
	}
	if cur != nil && !cur.proc.running() {
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
		f.c.logf("operator: controller for %s/%s exited (%v); restarting in %s", cur.namespace, cur.name, cur.proc.err, backoff)
		time.AfterFunc(backoff, f.poke)
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
	proc, err := f.start(ctx, want)
	if err != nil {
		f.c.logf("operator: cannot run the GPU operator controller for %s/%s: %v", want.Namespace, want.Name, err)
		f.mu.Lock()
		f.crashes++
		f.notBefore = time.Now().Add(5 * time.Second)
		f.mu.Unlock()
		time.AfterFunc(5*time.Second, f.poke)
		return
	}
	f.mu.Lock()
	f.current = &runningOperator{uid: want.UID, namespace: want.Namespace, name: want.Name, proc: proc, started: time.Now()}
	f.mu.Unlock()
	go func() {
		<-proc.exited
		f.poke()
	}()
}

func (f *operatorFollower) start(ctx context.Context, d *appsv1.Deployment) (*process, error) {
	if err := installOperatorFiles(f.c.Tools); err != nil {
		return nil, err
	}
	sa := d.Spec.Template.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	// The pod would get a projected token of its service account; the controller gets the same.
	expiry := int64((24 * time.Hour).Seconds())
	tok, err := f.c.Kube.CoreV1().ServiceAccounts(d.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for service account %s/%s: %w", d.Namespace, sa, err)
	}
	kubeconfig, err := f.c.kubeconfigWithToken("gpu-operator", tok.Status.Token)
	if err != nil {
		return nil, err
	}
	env := operatorEnv(d)
	env = append(env, "OPERATOR_NAMESPACE="+d.Namespace, "KUBECONFIG="+kubeconfig)
	logPath := filepath.Join(f.c.Dir, "gpu-operator.log")
	if lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		fmt.Fprintf(lf, "===== %s: running the real GPU operator controller for Deployment %s/%s (service account %s)\n",
			time.Now().Format(time.RFC3339), d.Namespace, d.Name, sa)
		lf.Close()
	}
	f.c.logf("operator: running the GPU operator controller for %s/%s as service account %s", d.Namespace, d.Name, sa)
	return f.c.spawner.startProcess("gpu-operator", f.c.Tools.Operator, []string{
		// The Deployment's own flags would bind :8080/:8081 and take a lease; on a shared machine the
		// process binds ephemeral loopback ports, and there is only ever one of it.
		"--leader-elect=false", "--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0",
	}, env, f.c.Dir, logPath)
}

// operatorEnv is the machine's environment plus the literal environment of the Deployment's
// operator container (DRIVER_MANAGER_IMAGE, VALIDATOR_IMAGE, … — the operator falls back to these
// for images a ClusterPolicy leaves unset, research §3). References to the pod's namespace resolve to
// the Deployment's namespace; other references are left out (the sandbox has no pod to resolve them in).
func operatorEnv(d *appsv1.Deployment) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "OPERATOR_NAMESPACE=") {
			env = append(env, kv)
		}
	}
	containers := d.Spec.Template.Spec.Containers
	if len(containers) == 0 {
		return env
	}
	c := containers[0]
	for _, cc := range containers {
		if cc.Name == "gpu-operator" {
			c = cc
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+d.Namespace)
		}
	}
	return env
}

// stopProcess stops the running controller, if any, and waits for it.
func (f *operatorFollower) stopProcess() {
	f.mu.Lock()
	cur := f.current
	f.current = nil
	f.crashes = 0
	f.notBefore = time.Time{}
	f.mu.Unlock()
	if cur != nil {
		cur.proc.stop(10 * time.Second)
	}
}

func (f *operatorFollower) pids() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.current == nil || !f.current.proc.running() {
		return nil
	}
	return []int{f.current.proc.cmd.Process.Pid}
}

// namespace is where the controller runs now ("" when none runs).
func (f *operatorFollower) namespace() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.current == nil {
		return ""
	}
	return f.current.namespace
}

// OperatorNamespace is the namespace the real operator controller runs for now, "" when it is not
// running (no operator Deployment, or its pod not Running yet, or the follower is off).
func (c *Cluster) OperatorNamespace() string {
	if c.operator == nil {
		return ""
	}
	return c.operator.namespace()
}

// operatorFilesVersion marks what /opt/gpu-operator holds, so a different operator build replaces it.
const operatorFilesVersion = OperatorModuleVersion + "/1"

// installOperatorFiles puts what the operator image carries where the controller reads it: its state
// manifests under /opt/gpu-operator (the paths are compiled in: controllers/state_manager.go) and the
// host's os-release under /host-etc (controllers/object_controls.go). These are fixed absolute paths,
// so this needs root, as the reference recipe does (shared/reference/operator-run.sh).
func installOperatorFiles(t *Tools) error {
	const root = "/opt/gpu-operator"
	// Sandboxes of parallel test binaries share these paths.
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("the GPU operator reads its manifests from %s, which cannot be created (run as root): %w", root, err)
	}
	unlock, err := lockFile(context.Background(), root+".lock", io.Discard)
	if err != nil {
		return err
	}
	defer unlock()
	marker := filepath.Join(root, ".gpuctl-sandbox")
	if b, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(b)) != operatorFilesVersion {
		entries, err := os.ReadDir(t.OperatorAssets)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
				return err
			}
		}
		if err := copyTree(t.OperatorAssets, root); err != nil {
			return err
		}
		if err := os.RemoveAll(filepath.Join(root, "manifests")); err != nil {
			return err
		}
		if err := copyTree(t.OperatorManifests, filepath.Join(root, "manifests")); err != nil {
			return err
		}
		if err := os.WriteFile(marker, []byte(operatorFilesVersion+"\n"), 0o644); err != nil {
			return err
		}
	}
	const osRelease = "/host-etc/os-release"
	if _, err := os.Stat(osRelease); err != nil {
		if err := os.MkdirAll(filepath.Dir(osRelease), 0o755); err != nil {
			return fmt.Errorf("the GPU operator reads %s, which cannot be created (run as root): %w", osRelease, err)
		}
		b, err := os.ReadFile("/etc/os-release")
		if err != nil {
			return err
		}
		if err := os.WriteFile(osRelease, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
