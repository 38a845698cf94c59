package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/e2e/sandbox/operator"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/olm"
	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
)

var clusterPolicyGVR = schema.GroupVersionResource{Group: "nvidia.com", Version: "v1", Resource: "clusterpolicies"}

func gpuNodeNames(c *Cluster) (gpu, cpu []string) {
	for _, n := range c.Nodes {
		switch {
		case n.Hardware.GPUs > 0:
			gpu = append(gpu, n.Node.Name)
		case !isControlPlane(&n.Node):
			cpu = append(cpu, n.Node.Name)
		}
	}
	sort.Strings(gpu)
	sort.Strings(cpu)
	return gpu, cpu
}

func isControlPlane(n *corev1.Node) bool {
	_, cp := n.Labels["node-role.kubernetes.io/control-plane"]
	_, master := n.Labels["node-role.kubernetes.io/master"]
	return cp || master
}

// waitPods waits, with a watch, until the pods matching selector in ns satisfy done.
func waitPods(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, selector string, done func([]corev1.Pod) bool) []corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	pods := map[string]corev1.Pod{}
	list := func() []corev1.Pod {
		var out []corev1.Pod
		for _, k := range slices.Sorted(maps.Keys(pods)) {
			out = append(out, pods[k])
		}
		return out
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return cs.CoreV1().Pods(ns).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return cs.CoreV1().Pods(ns).Watch(ctx, o)
		},
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, nil, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			delete(pods, p.Name)
		} else {
			pods[p.Name] = *p
		}
		return done(list()), nil
	})
	if err != nil {
		var states []string
		for _, p := range list() {
			states = append(states, fmt.Sprintf("%s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase))
		}
		t.Fatalf("pods %q in %s: %v; now: %v", selector, ns, err, states)
	}
	return list()
}

func runningOn(pods []corev1.Pod) []string {
	var nodes []string
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	sort.Strings(nodes)
	return nodes
}

func daemonSet(name string, tolerateGPU bool, affinity *corev1.Affinity) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Affinity:   affinity,
					Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
	if tolerateGPU {
		ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}
	return ds
}

// The gke flavour taints its GPU nodes as GKE does; the scheduler, the taint manager and kwok are real,
// so workloads land where they would on GKE.
func TestGPUWorkloadsLandOnlyWhereTheyShould(t *testing.T) {
	c := StartT(t, Options{Scenario: Scenario{Distro: "gke", GPUNodes: 2, CPUNodes: 2, GKEDevicePlugin: true}, NoOperator: true})
	ctx := t.Context()
	gpu, cpu := gpuNodeNames(c)
	if len(gpu) != 2 || len(cpu) != 2 {
		t.Fatalf("want 2 GPU and 2 CPU nodes, got %v and %v", gpu, cpu)
	}

	t.Run("a DaemonSet that tolerates nvidia.com/gpu and selects accelerators runs on every GPU node and nowhere else", func(t *testing.T) {
		affinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "cloud.google.com/gke-accelerator", Operator: corev1.NodeSelectorOpExists}}}},
		}}}
		if _, err := c.Kube.AppsV1().DaemonSets("default").Create(ctx, daemonSet("gpu-agent", true, affinity), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods := waitPods(t, ctx, c.Kube, "default", "app=gpu-agent", func(p []corev1.Pod) bool { return len(runningOn(p)) == len(gpu) })
		if got := runningOn(pods); !slices.Equal(got, gpu) {
			t.Errorf("gpu-agent runs on %v, want exactly the GPU nodes %v", got, gpu)
		}
	})

	t.Run("a DaemonSet without the toleration stays off the tainted GPU nodes", func(t *testing.T) {
		if _, err := c.Kube.AppsV1().DaemonSets("default").Create(ctx, daemonSet("plain-agent", false, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods := waitPods(t, ctx, c.Kube, "default", "app=plain-agent", func(p []corev1.Pod) bool { return len(runningOn(p)) == len(cpu) })
		if got := runningOn(pods); !slices.Equal(got, cpu) {
			t.Errorf("plain-agent runs on %v, want exactly the CPU nodes %v", got, cpu)
		}
	})

	t.Run("a pod requesting nvidia.com/gpu: 1 is scheduled on a GPU node and runs", func(t *testing.T) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "cuda", Namespace: "default", Labels: map[string]string{"app": "cuda"}},
			Spec: corev1.PodSpec{
				Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
				Containers: []corev1.Container{{Name: "cuda", Image: "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu22.04",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}},
			},
		}
		if _, err := c.Kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods := waitPods(t, ctx, c.Kube, "default", "app=cuda", func(p []corev1.Pod) bool { return len(runningOn(p)) == 1 })
		if n := pods[0].Spec.NodeName; !slices.Contains(gpu, n) {
			t.Errorf("the GPU pod runs on %s, not on a GPU node %v", n, gpu)
		}
	})

	t.Run("system-node-critical pods need a ResourceQuota outside kube-system, as on GKE", func(t *testing.T) {
		critical := func(ns string) *corev1.Pod {
			return &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "critical-", Namespace: ns},
				Spec: corev1.PodSpec{PriorityClassName: "system-node-critical",
					Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
			}
		}
		_, err := c.Kube.CoreV1().Pods("default").Create(ctx, critical("default"), metav1.CreateOptions{})
		// The quota admission plugin refuses with "insufficient quota to match these scopes".
		if err == nil || !strings.Contains(err.Error(), "insufficient quota") {
			t.Fatalf("a system-node-critical pod in default was not refused for want of a quota: %v", err)
		}
		quota := &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "critical-pods", Namespace: "default"},
			Spec: corev1.ResourceQuotaSpec{
				Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("100")},
				ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
					ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn,
					Values: []string{"system-node-critical", "system-cluster-critical"},
				}}},
			},
		}
		if _, err := c.Kube.CoreV1().ResourceQuotas("default").Create(ctx, quota, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The quota controller must first count usage before admission accepts pods against it.
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := c.Kube.CoreV1().Pods("default").Create(ctx, critical("default"), metav1.CreateOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("a system-node-critical pod is still refused with a quota in place: %v", err)
		}
	})
}

// The real GPU operator controllers, started by the follower for Deployments of their own, reconcile a
// ClusterPolicy to ready: gpuctl's default release v26.7.0 on a gke sandbox and, at the same time,
// v25.10.1 on a kubeadm sandbox, each the controller its Deployment's image names, built from NVIDIA's
// sources, with its own release's CRDs and its own files at /opt/gpu-operator.
func TestRealOperatorReconcilesClusterPolicy(t *testing.T) {
	gke := StartT(t, Options{Scenario: Scenario{Distro: "gke", GPUNodes: 2, CPUNodes: 1, NFDLabels: true}})
	old := StartT(t, Options{Scenario: Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 0, NFDLabels: true}, OperatorVersion: "v25.10.1"})
	ctx := t.Context()
	gpu, _ := gpuNodeNames(gke)
	const ns = "gpu-operator"
	runs := []struct {
		c       *Cluster
		release string
		build   toolchain.OperatorBuild
		created time.Time
	}{{c: gke, release: "v26.7.0"}, {c: old, release: "v25.10.1"}}
	for i := range runs {
		r := &runs[i]
		b, warning, err := r.c.Tools.Operator(r.release)
		if err != nil {
			t.Fatal(err)
		}
		if warning != "" {
			t.Logf("WARNING: %s", warning)
		}
		r.build = b
		r.created = deployOperator(t, r.c, ns, b, "nvcr.io/nvidia/gpu-operator:"+r.release)
	}

	t.Run("the follower runs the controller of the release each Deployment's image names", func(t *testing.T) {
		for _, r := range runs {
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
				return r.c.OperatorNamespace() == ns, nil
			})
			if err != nil {
				t.Fatalf("%s: operator controller not running for %s (running for %q)", r.release, ns, r.c.OperatorNamespace())
			}
			got := r.c.OperatorRuns()
			if len(got) != 1 || got[0].Release != r.build.Release || got[0].FromSources != r.build.FromSources || got[0].Namespace != ns ||
				got[0].Started.IsZero() || !got[0].Exited.IsZero() || got[0].ExitErr != "" {
				t.Errorf("%s: OperatorRuns = %+v, want one running run of %s (from sources: %v) in %s", r.release, got, r.build.Release, r.build.FromSources, ns)
			}
			log, _ := os.ReadFile(filepath.Join(r.c.Dir, "gpu-operator.log"))
			if want := "running the real GPU operator controller " + r.build.Release + " ("; !strings.Contains(string(log), want) {
				t.Errorf("%s: gpu-operator.log has no header %q", r.release, want)
			}
		}
	})

	t.Run("each controller process sees its own release's files at /opt/gpu-operator", func(t *testing.T) {
		if !gke.operator.PrivateView() {
			t.Skip("no private mount namespaces here (not root): the controllers share one copy")
		}
		for _, r := range runs {
			want, err := os.ReadFile(filepath.Join(r.build.Root, toolchain.ReleaseMarker))
			if err != nil {
				t.Fatal(err)
			}
			// The follower may be restarting the controller (a crash, a back-off): read the files of the
			// process that runs now, and only take a reading the same process is still running after.
			var pid int
			var got []byte
			var readErr error
			var hasDRA bool
			err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
				pids := r.c.operator.PIDs()
				if len(pids) != 1 {
					return false, nil
				}
				pid = pids[0]
				got, readErr = os.ReadFile(fmt.Sprintf("/proc/%d/root%s/%s", pid, operator.FilesPath, toolchain.ReleaseMarker))
				_, statErr := os.Stat(fmt.Sprintf("/proc/%d/root%s/manifests/state-dra-driver", pid, operator.FilesPath))
				hasDRA = statErr == nil
				// A process just (re)started may not have its private mounts yet: read again until it does.
				return readErr == nil && slices.Equal(r.c.operator.PIDs(), pids), nil
			})
			if err != nil {
				t.Fatalf("%s: no controller ran long enough to read its files (last pid %d, %v): %v", r.release, pid, readErr, err)
			}
			if readErr != nil || string(got) != string(want) {
				t.Errorf("%s: the controller (pid %d) sees %q at %s, want %q (%v)", r.release, pid, got, operator.FilesPath, want, readErr)
			}
			// v26.x carries the DRA driver's state manifests; v25.10.1 does not.
			if r.build.FromSources && hasDRA != (r.release != "v25.10.1") {
				t.Errorf("%s: manifests/state-dra-driver present: %v", r.release, hasDRA)
			}
		}
	})

	t.Run("the ClusterPolicy becomes ready with condition Ready/Reconciled", func(t *testing.T) {
		for _, r := range runs {
			waitClusterPolicyReady(t, ctx, dynamic.NewForConfigOrDie(r.c.Config), "cluster-policy", 4*time.Minute)
			t.Logf("%s: Reconciled %s after the operator Deployment was created", r.release, time.Since(r.created).Round(100*time.Millisecond))
		}
	})

	t.Run("the operator created its operand DaemonSets and a validator runs on every GPU node", func(t *testing.T) {
		dss, err := gke.Kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, d := range dss.Items {
			names = append(names, d.Name)
		}
		for _, want := range []string{"nvidia-device-plugin-daemonset", "nvidia-operator-validator", "nvidia-container-toolkit-daemonset", "gpu-feature-discovery", "nvidia-dcgm-exporter"} {
			if !slices.Contains(names, want) {
				t.Errorf("operand DaemonSet %s missing; have %v", want, names)
			}
		}
		pods := waitPods(t, ctx, gke.Kube, ns, "app=nvidia-operator-validator", func(p []corev1.Pod) bool { return len(runningOn(p)) == len(gpu) })
		if got := runningOn(pods); !slices.Equal(got, gpu) {
			t.Errorf("validators run on %v, want %v", got, gpu)
		}
	})

	t.Run("the operator's device plugin makes nvidia.com/gpu allocatable on the GPU nodes", func(t *testing.T) {
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			for _, name := range gpu {
				n, err := gke.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if q := n.Status.Allocatable["nvidia.com/gpu"]; q.Value() != int64(gke.Scenario.GPUsPerNode) {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("nvidia.com/gpu not allocatable on every GPU node: %v", err)
		}
	})

	t.Run("a controller exit the sandbox did not cause is reported, and the controller restarted", func(t *testing.T) {
		pids := old.operator.PIDs()
		if len(pids) != 1 {
			t.Fatalf("controller pids %v", pids)
		}
		if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var got []OperatorRun
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			got = old.OperatorRuns()
			return len(got) == 2 && len(old.operator.PIDs()) == 1, nil
		})
		if err != nil {
			t.Fatalf("no second run after the controller was killed: %+v", got)
		}
		if got[0].ExitErr != "signal: killed" || got[0].Exited.IsZero() {
			t.Errorf("the killed run: %+v, want ExitErr \"signal: killed\" and an exit time", got[0])
		}
		if got[1].Release != runs[1].build.Release || !got[1].Exited.IsZero() || got[1].ExitErr != "" {
			t.Errorf("the restarted run: %+v", got[1])
		}
	})

	t.Run("deleting the Deployment stops the controller, which is no crash", func(t *testing.T) {
		pids := gke.operator.PIDs()
		if err := gke.Kube.AppsV1().Deployments(ns).Delete(ctx, "gpu-operator", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The follower forgets the controller first and records its exit once the process is gone.
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			runs := gke.OperatorRuns()
			return gke.OperatorNamespace() == "" && len(runs) > 0 && !runs[len(runs)-1].Exited.IsZero(), nil
		})
		if err != nil {
			t.Fatalf("the operator controller still runs for %q after its Deployment was deleted: %+v", gke.OperatorNamespace(), gke.OperatorRuns())
		}
		assertGone(t, pids)
		got := gke.OperatorRuns()
		if len(got) != 1 || got[0].Exited.IsZero() || got[0].ExitErr != "" {
			t.Errorf("OperatorRuns = %+v, want the one run, stopped by the sandbox (no ExitErr) — the controller never exited on its own", got)
		}
	})
}

// deployOperator does what an operator install does for the follower (deployOperatorController) and
// creates the release's sample ClusterPolicy named cluster-policy. It returns when the Deployment was
// created.
func deployOperator(t *testing.T, c *Cluster, ns string, b toolchain.OperatorBuild, image string) time.Time {
	t.Helper()
	created := deployOperatorController(t, c, ns, b, image)
	policy := readSample(t, filepath.Join(b.Samples, "v1_clusterpolicy.yaml"))
	policy.SetName("cluster-policy")
	if _, err := dynamic.NewForConfigOrDie(c.Config).Resource(clusterPolicyGVR).Create(t.Context(), policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return created
}

// deployOperatorController does what an operator install does for the follower: the release's CRDs, a
// namespace with the quota GKE needs, a cluster-admin service account (these tests are about the
// follower and the controller, not a chart's RBAC) and a Deployment running image. It returns when the
// Deployment was created.
func deployOperatorController(t *testing.T, c *Cluster, ns string, b toolchain.OperatorBuild, image string) time.Time {
	t.Helper()
	ctx := t.Context()
	applyCRDsFromDir(t, c, b.CRDs)
	mustCreate(t, func() error {
		_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	// GKE admits the operands' system-node-critical pods only with this quota (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html).
	mustCreate(t, func() error {
		_, err := c.Kube.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator-quota"},
			Spec: corev1.ResourceQuotaSpec{
				Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("100")},
				ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
					ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn,
					Values: []string{"system-node-critical", "system-cluster-critical"},
				}}},
			},
		}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := c.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator"}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator-test"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "gpu-operator", Namespace: ns}},
		}, metav1.CreateOptions{})
		return err
	})
	_, tag, _ := strings.Cut(path.Base(image), ":")
	labels := map[string]string{"app": "gpu-operator"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: "gpu-operator",
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: "gpu-operator", Image: image,
						// The sample ClusterPolicy sets no images: like NVIDIA's bundle, the Deployment names them
						// in its environment, which the follower must pass through as the pod would see it.
						Env: olm.OperatorImageEnv(tag)}},
				},
			},
		},
	}
	mustCreate(t, func() error {
		_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
		return err
	})
	return time.Now()
}

func waitClusterPolicyReady(t *testing.T, ctx context.Context, dyn dynamic.Interface, name string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *unstructured.Unstructured
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			return dyn.Resource(clusterPolicyGVR).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			return dyn.Resource(clusterPolicyGVR).Watch(ctx, o)
		},
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			return false, nil
		}
		last = u
		state, _, _ := unstructured.NestedString(u.Object, "status", "state")
		if state != "ready" {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "True" && m["reason"] == "Reconciled" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		var status any
		if last != nil {
			status = last.Object["status"]
		}
		t.Fatalf("ClusterPolicy %s not ready/Reconciled: %v; status: %v", name, err, status)
	}
}

func applyCRDsFromDir(t *testing.T, c *Cluster, dir string) {
	t.Helper()
	ext := apiextensionsclient.NewForConfigOrDie(c.Config)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s: %v", dir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), &crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := waitCRDEstablished(t.Context(), ext, crd.Name); err != nil {
			t.Fatal(err)
		}
	}
}

func readSample(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return u
}

func mustCreate(t *testing.T, create func() error) {
	t.Helper()
	if err := create(); err != nil {
		t.Fatal(err)
	}
}

// assertGone waits briefly for processes to disappear (a process's death cannot be watched through any
// API the test has, so this polls) and fails for each that is still there.
func assertGone(t *testing.T, pids []int) {
	t.Helper()
	var alive []int
	_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		alive = alive[:0]
		for _, pid := range pids {
			if processAlive(pid) {
				alive = append(alive, pid)
			}
		}
		return len(alive) == 0, nil
	})
	for _, pid := range alive {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		t.Errorf("process %d is still running: %s", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
}

// processAlive is true for a live process; a zombie (exited, not yet reaped) counts as gone.
func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name: "pid (comm) S …".
	s := string(stat)
	if i := strings.LastIndex(s, ")"); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func TestStopEndsEveryProcess(t *testing.T) {
	c := StartT(t, Options{Scenario: Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 1}, NoOperator: true})
	pids := c.PIDs()
	if len(pids) != 5 {
		t.Fatalf("want 5 processes (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok), got %v", pids)
	}
	dir := c.Dir
	c.Stop()
	assertGone(t, pids)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state directory %s still exists after Stop: %v", dir, err)
	}
}

const childEnv = "GPUCTL_SANDBOX_TEST_CHILD"

// TestKilledTestBinaryLeavesNoOrphans runs a sandbox in a child copy of this test binary, kills the
// child with SIGKILL (as `go test -timeout` or an OOM killer would: no cleanup runs), and checks that
// every process of its cluster dies with it.
func TestKilledTestBinaryLeavesNoOrphans(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		c, err := Start(t.Context(), Options{Scenario: Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 0}, NoOperator: true})
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		var s []string
		for _, p := range c.PIDs() {
			s = append(s, strconv.Itoa(p))
		}
		fmt.Println("PIDS", strings.Join(s, " "), c.Dir)
		select {} // until killed
	}
	if testing.Short() {
		t.Skip("starts a real Kubernetes control plane; skipped in -short mode")
	}
	// Warm the tool cache here, so the child does not build.
	if _, err := toolchain.EnsureTools(t.Context(), "", testWriter{t}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledTestBinaryLeavesNoOrphans$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	var dir string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "ERROR") {
			t.Fatal(line)
		}
		if f := strings.Fields(line); len(f) > 1 && f[0] == "PIDS" {
			for _, s := range f[1 : len(f)-1] {
				pid, _ := strconv.Atoi(s)
				pids = append(pids, pid)
			}
			dir = f[len(f)-1]
			break
		}
	}
	if len(pids) != 5 {
		_ = cmd.Process.Kill()
		t.Fatalf("child reported processes %v, want 5", pids)
	}
	for _, pid := range pids {
		if !processAlive(pid) {
			t.Fatalf("process %d not running before the kill", pid)
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	assertGone(t, pids)
	_ = os.RemoveAll(dir) // nobody ran Stop
}

// Users minted by the sandbox are real identities to RBAC: nothing until granted, then exactly the
// grant — what gpuctl's permission checks are tested with.
func TestMintedUsersHaveOnlyWhatRBACGrants(t *testing.T) {
	c := StartT(t, Options{Scenario: Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 0}, NoOperator: true})
	ctx := t.Context()
	path, cfg, err := c.NewUser("alice", "platform-team")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no kubeconfig for alice: %v", err)
	}
	alice := kubernetes.NewForConfigOrDie(cfg)
	if _, err := alice.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("alice listed nodes without any grant: %v", err)
	}
	// Grant the group read access to nodes, nothing else.
	if _, err := c.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "node-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "platform-team-node-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "node-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", Name: "platform-team", APIGroup: "rbac.authorization.k8s.io"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := alice.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("alice cannot list nodes after the group was granted it: %v", err)
	}
	if _, err := alice.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); err == nil {
		t.Error("alice created a namespace, which nothing granted")
	}
}
