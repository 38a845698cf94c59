package sandbox

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/dra"
)

// draKubeletPluginLabel selects the nodes NVIDIA's DRA driver chart runs its kubelet plugin on, as
// NVIDIA's GPU Operator documentation for the DRA driver has users set kubeletPlugin.nodeSelector.
const draKubeletPluginLabel = "nvidia.com/dra-kubelet-plugin"

// draSandbox starts a kubeadm sandbox with two GPU nodes of gpusPerNode H100s, labels the first for
// the DRA kubelet plugin, runs a DaemonSet shaped like NVIDIA's DRA driver chart's kubelet plugin and
// creates the chart's DeviceClass gpu.nvidia.com and a ResourceClaimTemplate for one GPU. It returns
// the cluster and the plugin's node once that node's ResourceSlice is published.
func draSandbox(t *testing.T, gpusPerNode int) (*Cluster, string, *resourceapi.ResourceSlice) {
	t.Helper()
	c := StartT(t, Options{Scenario: Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1, GPUsPerNode: gpusPerNode}, NoOperator: true})
	ctx := t.Context()
	gpu, _ := gpuNodeNames(c)
	if len(gpu) != 2 {
		t.Fatalf("want 2 GPU nodes, got %v", gpu)
	}
	pluginNode := gpu[0]
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, draKubeletPluginLabel)
	if _, err := c.Kube.CoreV1().Nodes().Patch(ctx, pluginNode, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	ns := "nvidia-dra-driver-gpu"
	mustCreate(t, func() error {
		_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	labels := map[string]string{"app.kubernetes.io/name": "nvidia-dra-driver-gpu", "app.kubernetes.io/component": "kubelet-plugin"}
	image := "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0"
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "nvidia-dra-driver-gpu-kubelet-plugin", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{draKubeletPluginLabel: "true"},
					Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					Containers: []corev1.Container{
						{Name: "compute-domains", Image: image, Command: []string{"bash", "-c"}, Args: []string{"compute-domain-kubelet-plugin -v $(LOG_VERBOSITY)"}},
						{Name: "gpus", Image: image, Command: []string{"bash", "-c"}, Args: []string{"gpu-kubelet-plugin -v $(LOG_VERBOSITY)"}},
					},
				},
			},
		},
	}
	mustCreate(t, func() error {
		_, err := c.Kube.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
		return err
	})

	// The DeviceClass of NVIDIA's chart and of the GPU operator's GPUCluster (NVIDIA/gpu-operator
	// manifests/state-dra-driver/0400_deviceclass-gpu.yaml@v26.7.0).
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu.nvidia.com"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
		}}}},
	}
	mustCreate(t, func() error {
		_, err := c.Kube.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{})
		return err
	})
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "single-gpu", Namespace: "default"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com"}}},
		}}},
	}
	mustCreate(t, func() error {
		_, err := c.Kube.ResourceV1().ResourceClaimTemplates("default").Create(ctx, tmpl, metav1.CreateOptions{})
		return err
	})

	var slice *resourceapi.ResourceSlice
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		slice = nil
		for i := range list.Items {
			if sl := &list.Items[i]; sl.Spec.Driver == dra.Driver && sl.Spec.NodeName != nil && *sl.Spec.NodeName == pluginNode {
				slice = sl
			}
		}
		return slice != nil, nil
	})
	if err != nil {
		t.Fatalf("no %s ResourceSlice for %s: %v", dra.Driver, pluginNode, err)
	}
	return c, pluginNode, slice
}

// gpuClaimPod is a pod whose one container uses a GPU claimed from the ResourceClaimTemplate single-gpu.
func gpuClaimPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "dra-cuda"}},
		Spec: corev1.PodSpec{
			Tolerations:    []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("single-gpu")}},
			Containers: []corev1.Container{{Name: "cuda", Image: "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu22.04",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
		},
	}
}

// allocatedDevice returns the device the scheduler allocated to a pod's one claim for request, as
// pool/device.
func allocatedDevice(t *testing.T, ctx context.Context, c *Cluster, p *corev1.Pod, request string) string {
	t.Helper()
	if len(p.Status.ResourceClaimStatuses) != 1 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("pod %s: resourceClaimStatuses %+v, want the claim made from its template", p.Name, p.Status.ResourceClaimStatuses)
	}
	claim, err := c.Kube.ResourceV1().ResourceClaims(p.Namespace).Get(ctx, *p.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim %s of pod %s is not allocated one device: %+v", claim.Name, p.Name, claim.Status.Allocation)
	}
	r := claim.Status.Allocation.Devices.Results[0]
	if r.Driver != dra.Driver || r.Request != request {
		t.Errorf("claim %s: result %+v, want driver %s for request %s", claim.Name, r, dra.Driver, request)
	}
	if !slices.ContainsFunc(claim.Status.ReservedFor, func(ref resourceapi.ResourceClaimConsumerReference) bool { return ref.UID == p.UID }) {
		t.Errorf("claim %s is not reserved for pod %s: %+v", claim.Name, p.Name, claim.Status.ReservedFor)
	}
	return r.Pool + "/" + r.Device
}

// The DRA kubelet-plugin stand-in publishes the GPUs of the node NVIDIA's kubelet plugin runs on; the
// real kube-scheduler allocates a claim from them and kwok runs the pod.
func TestDRAClaimIsAllocatedByTheRealScheduler(t *testing.T) {
	t.Parallel()
	c, node, slice := draSandbox(t, 2)
	ctx := t.Context()

	var devices []string
	for _, d := range slice.Spec.Devices {
		devices = append(devices, node+"/"+d.Name)
	}
	if want := []string{node + "/gpu-0", node + "/gpu-1"}; !slices.Equal(devices, want) {
		t.Fatalf("the slice of %s has devices %v, want %v", node, devices, want)
	}
	if p := slice.Spec.Devices[0].Attributes["productName"].StringValue; p == nil || *p != "NVIDIA H100 80GB HBM3" {
		t.Errorf("productName %v, want the node's H100", p)
	}
	list, err := c.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("%d ResourceSlices, want only the plugin node's", len(list.Items))
	}

	if _, err := c.Kube.CoreV1().Pods("default").Create(ctx, gpuClaimPod("dra-cuda-0"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := waitPods(t, ctx, c.Kube, "default", "app=dra-cuda", func(p []corev1.Pod) bool { return len(runningOn(p)) == 1 })
	if pods[0].Spec.NodeName != node {
		t.Errorf("the pod runs on %s, want %s, the only node with a published GPU", pods[0].Spec.NodeName, node)
	}
	if got := allocatedDevice(t, ctx, c, &pods[0], "gpu"); !slices.Contains(devices, got) {
		t.Errorf("allocated %s, not a device of %s's slice %v", got, node, devices)
	}
}

// More claims than GPUs: the real scheduler allocates each GPU once and leaves the last pod Pending
// with its DRA plugin's reason; when a pod goes, its claim is freed and the pending pod gets the GPU.
func TestDRAMoreClaimsThanGPUsLeavesOnePending(t *testing.T) {
	t.Parallel()
	c, node, _ := draSandbox(t, 2)
	ctx := t.Context()

	for i := range 3 {
		if _, err := c.Kube.CoreV1().Pods("default").Create(ctx, gpuClaimPod(fmt.Sprintf("dra-cuda-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	unschedulable := func(p corev1.Pod) string {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				return cond.Message
			}
		}
		return ""
	}
	pods := waitPods(t, ctx, c.Kube, "default", "app=dra-cuda", func(ps []corev1.Pod) bool {
		pending := 0
		for _, p := range ps {
			if p.Status.Phase == corev1.PodPending && unschedulable(p) != "" {
				pending++
			}
		}
		return len(runningOn(ps)) == 2 && pending == 1
	})
	seen := map[string]bool{}
	var pending corev1.Pod
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning {
			pending = p
			continue
		}
		d := allocatedDevice(t, ctx, c, &p, "gpu")
		if seen[d] || !strings.HasPrefix(d, node+"/") {
			t.Errorf("pod %s got %s: twice, or not on %s", p.Name, d, node)
		}
		seen[d] = true
	}
	// kube-scheduler's DynamicResources plugin (pkg/scheduler/framework/plugins/dynamicresources@v1.37).
	if msg := unschedulable(pending); !strings.Contains(msg, "cannot allocate all claims") {
		t.Errorf("pod %s is pending with %q, want the DRA plugin's \"cannot allocate all claims\"", pending.Name, msg)
	}

	var running string
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning {
			running = p.Name
			break
		}
	}
	if err := c.Kube.CoreV1().Pods("default").Delete(ctx, running, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The deleted pod's claim is freed once the pod is gone (kube-controller-manager's resourceclaim
	// controller); the scheduler then allocates the GPU to the pending pod.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := c.Kube.CoreV1().Pods("default").Get(ctx, running, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, nil
		}
		p, err := c.Kube.CoreV1().Pods("default").Get(ctx, pending.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pending = *p
		return p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("after %s went, the pending pod %s did not get its GPU: %v; it is %s: %q", running, pending.Name, err, pending.Status.Phase, unschedulable(pending))
	}
	if d := allocatedDevice(t, ctx, c, &pending, "gpu"); !strings.HasPrefix(d, node+"/") {
		t.Errorf("pod %s got %s, not a GPU of %s", pending.Name, d, node)
	}
}

var gpuClusterGVR = schema.GroupVersionResource{Group: "nvidia.com", Version: "v1alpha1", Resource: "gpuclusters"}

// NVIDIA's real v26.7.0 controller reconciles the sample GPUCluster (the DRA stack): it deploys the DRA
// driver's kubelet plugin, whose pods the stand-in acts for, the DeviceClasses and the DRA validator,
// whose claims the real scheduler allocates from the stand-in's slices; the GPUCluster becomes ready and
// a workload's claim is allocated too.
func TestRealOperatorReconcilesGPUCluster(t *testing.T) {
	t.Parallel()
	c := StartT(t, Options{Scenario: Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1, GPUsPerNode: 2, NFDLabels: true}, OperatorVersion: "v26.7.0"})
	ctx := t.Context()
	gpu, _ := gpuNodeNames(c)
	b, _, err := c.Tools.Operator("v26.7.0")
	if err != nil {
		t.Fatal(err)
	}
	const ns = "gpu-operator"
	deployOperatorController(t, c, ns, b, "nvcr.io/nvidia/gpu-operator:v26.7.0")
	dyn := dynamic.NewForConfigOrDie(c.Config)
	if _, err := dyn.Resource(gpuClusterGVR).Create(ctx, readSample(t, filepath.Join(b.Samples, "nvidia_v1alpha1_gpucluster.yaml")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var status any
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(gpuClusterGVR).Get(ctx, "gpu-cluster", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		status = u.Object["status"]
		state, _, _ := unstructured.NestedString(u.Object, "status", "state")
		return state == "ready", nil
	})
	if err != nil {
		t.Fatalf("GPUCluster not ready: %v; status %v", err, status)
	}

	ds, err := c.Kube.AppsV1().DaemonSets(ns).Get(ctx, "nvidia-dra-driver-kubelet-plugin", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Status.NumberReady != int32(len(gpu)) {
		t.Errorf("kubelet plugin ready on %d nodes, want %d", ds.Status.NumberReady, len(gpu))
	}
	class, err := c.Kube.ResourceV1().DeviceClasses().Get(ctx, "gpu.nvidia.com", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the operator did not create DeviceClass gpu.nvidia.com: %v", err)
	}
	if s := class.Spec.Selectors; len(s) != 1 || s[0].CEL == nil || !strings.Contains(s[0].CEL.Expression, "device.attributes['gpu.nvidia.com'].type == 'gpu'") {
		t.Errorf("DeviceClass gpu.nvidia.com selectors %+v", s)
	}
	sliceList, err := c.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var published []string
	for _, sl := range sliceList.Items {
		if sl.Spec.Driver == dra.Driver && sl.Spec.NodeName != nil && len(sl.Spec.Devices) == 2 {
			published = append(published, *sl.Spec.NodeName)
		}
	}
	slices.Sort(published)
	if !slices.Equal(published, gpu) {
		t.Errorf("nodes with a 2-GPU slice: %v, want %v", published, gpu)
	}

	// The DRA validator's pods run only once their admin-access claims are allocated.
	validators := waitPods(t, ctx, c.Kube, ns, "app.kubernetes.io/name=nvidia-dra-validator", func(p []corev1.Pod) bool { return len(runningOn(p)) == len(gpu) })
	for _, p := range validators {
		allocatedDevice(t, ctx, c, &p, "validation-gpu")
	}

	mustCreate(t, func() error {
		_, err := c.Kube.ResourceV1().ResourceClaimTemplates("default").Create(ctx, &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "single-gpu", Namespace: "default"},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
				Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com"}}},
			}}},
		}, metav1.CreateOptions{})
		return err
	})
	if _, err := c.Kube.CoreV1().Pods("default").Create(ctx, gpuClaimPod("dra-cuda-0"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := waitPods(t, ctx, c.Kube, "default", "app=dra-cuda", func(p []corev1.Pod) bool { return len(runningOn(p)) == 1 })
	if d := allocatedDevice(t, ctx, c, &pods[0], "gpu"); !slices.ContainsFunc(gpu, func(n string) bool { return strings.HasPrefix(d, n+"/") }) {
		t.Errorf("the workload got %s, not a GPU of %v", d, gpu)
	}
}
