package preflight

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// gpuPod is a Running pod in ns on node whose one container asks for resources (name=quantity).
func gpuPod(ns, name, node string, resources map[corev1.ResourceName]string) *corev1.Pod {
	list := corev1.ResourceList{}
	for r, q := range resources {
		list[r] = resource.MustParse(q)
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: list}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// claimPod is a Running pod with a ResourceClaim from template one-gpu, which Kubernetes named claim.
func claimPod(ns, name, node, claim string) *corev1.Pod {
	p := gpuPod(ns, name, node, nil)
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
	p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
	return p
}

// allocated is a ResourceClaim allocated one device of driver on node.
func allocated(ns, name, driver, node string, admin bool) *resourcev1.ResourceClaim {
	r := resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: node, Device: "gpu-0"}
	if admin {
		r.AdminAccess = ptr.To(true)
	}
	return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{r}}}}}
}

func TestGPUHolders(t *testing.T) {
	verify := gpuPod("gpu-operator", "gpuctl-verify-a-1", "a-1", map[corev1.ResourceName]string{"nvidia.com/gpu": "1"})
	verify.Labels = map[string]string{"app.kubernetes.io/name": plan.VerifyName, "app.kubernetes.io/managed-by": "gpuctl"}
	validation := gpuPod("gpu-operator", "nvidia-cuda-validator-x", "a-1", map[corev1.ResourceName]string{"nvidia.com/gpu": "1"})
	validation.OwnerReferences = []metav1.OwnerReference{{APIVersion: "nvidia.com/v1", Kind: "ClusterPolicy", Name: "cluster-policy"}}
	draValidator := claimPod("gpu-operator", "nvidia-dra-validator-x", "a-1", "nvidia-dra-validator-x-gpu")
	draValidator.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "nvidia-dra-validator"}}
	done := gpuPod("default", "done", "a-1", map[corev1.ResourceName]string{"nvidia.com/gpu": "1"})
	done.Status.Phase = corev1.PodSucceeded
	claims := []resourcev1.ResourceClaim{
		*allocated("ml", "train-gpu-abcde", plan.DRADriverName, "a-1", false),
		*allocated("ml", "nic-abcde", "rdma.example.com", "a-1", false),
		*allocated("ml", "peek-abcde", plan.DRADriverName, "a-1", true),
		*allocated("gpu-operator", "nvidia-dra-validator-x-gpu", plan.DRADriverName, "a-1", true),
	}
	d := disruptions{nodes: map[string][]string{"a-1": {"MIG manager repartitions its GPUs"}}}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		counted bool
	}{
		{"a pod asking for nvidia.com/gpu on a repartitioned node is counted", gpuPod("default", "cuda", "a-1", map[corev1.ResourceName]string{"nvidia.com/gpu": "1"}), true},
		{"the same pod on another node is not", gpuPod("default", "cuda", "a-2", map[corev1.ResourceName]string{"nvidia.com/gpu": "1"}), false},
		{"a pod on a MIG device counts", gpuPod("default", "mig", "a-1", map[corev1.ResourceName]string{"nvidia.com/mig-1g.5gb": "1"}), true},
		{"a pod without GPUs is not", gpuPod("default", "web", "a-1", map[corev1.ResourceName]string{"cpu": "1"}), false},
		{"a Succeeded pod holds nothing", done, false},
		{"gpuctl's verify pod is not counted", verify, false},
		{"the operator's CUDA validation pod is not counted", validation, false},
		{"the DRA validator's admin-access claim is not counted", draValidator, false},
		{"a pod holding a ResourceClaim allocated from gpu.nvidia.com is counted", claimPod("ml", "train", "a-1", "train-gpu-abcde"), true},
		{"a claim of another driver is not", claimPod("ml", "net", "a-1", "nic-abcde"), false},
		{"an admin-access claim holds no GPU", claimPod("ml", "peek", "a-1", "peek-abcde"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := gpuHolders(d, []corev1.Pod{*tc.pod}, claims, "gpu-operator")
			if counted := len(got) == 1; counted != tc.counted {
				t.Errorf("gpuHolders = %+v, want counted %v", got, tc.counted)
			}
		})
	}
	t.Run("a switch between the stacks counts the pods of every node", func(t *testing.T) {
		got := gpuHolders(disruptions{every: "the DRA stack replaces the device plugin"},
			[]corev1.Pod{*gpuPod("default", "cuda", "z-9", map[corev1.ResourceName]string{"nvidia.com/gpu": "1"})}, nil, "gpu-operator")
		if len(got) != 1 || got[0].Node != "z-9" {
			t.Errorf("gpuHolders = %+v, want the pod on z-9", got)
		}
	})
}

// migPlan is a Plan whose MIG step labels each node of nodes with config.
func migPlan(config string, nodes ...string) *plan.Plan {
	p := testPlan(nil, false)
	l := &plan.NodeLabels{Key: plan.MIGLabel, Nodes: map[string]string{}}
	for _, n := range nodes {
		l.Nodes[n] = config
	}
	p.Steps = append(p.Steps, plan.Step{ID: plan.MIGStepID, Kind: plan.KindNodeLabels, Labels: l})
	return p
}

func labelled(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func TestGPUWorkCheck(t *testing.T) {
	cuda := gpuPod("default", "cuda", "a-1", map[corev1.ResourceName]string{"nvidia.com/gpu": "1"})
	withClusterPolicy := func(d *detect.Result) *detect.Result {
		d.Existing.ClusterPolicies = []detect.ClusterPolicy{{Name: "cluster-policy"}}
		return d
	}
	dra := func(p *plan.Plan) *plan.Plan {
		p.Steps = append(p.Steps, plan.Step{ID: "wait-gpucluster", Kind: plan.KindWaitGPUCluster, Target: plan.GPUClusterName})
		return p
	}
	sharing := func(p *plan.Plan, key string) *plan.Plan {
		p.Steps = append(p.Steps, plan.Step{ID: "node-labels", Kind: plan.KindNodeLabels,
			Labels: &plan.NodeLabels{Key: plan.SharingLabel, Nodes: map[string]string{"a-1": key}}})
		return p
	}
	timeSliced := map[string]string{"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4"}
	for _, tc := range []struct {
		name      string
		objects   []runtime.Object
		plan      *plan.Plan
		detection *detect.Result
		status    Status
		msg, hint string
	}{
		{"a GPU pod on a node MIG manager repartitions is refused, naming the pod, the node and the way out",
			[]runtime.Object{labelled("a-1", map[string]string{plan.MIGLabel: "all-1g.5gb"}), cuda}, migPlan("all-3g.20gb", "a-1"), testDetection(),
			StatusFail, "default/cuda on node a-1", "kubectl drain a-1 --ignore-daemonsets --delete-emptydir-data"},
		{"a GPU pod on a node whose MIG config stays passes",
			[]runtime.Object{labelled("a-1", map[string]string{plan.MIGLabel: "all-3g.20gb"}), cuda}, migPlan("all-3g.20gb", "a-1"), testDetection(),
			StatusPass, "", ""},
		{"a repartition with no GPU pod passes and names the nodes",
			[]runtime.Object{labelled("a-1", map[string]string{plan.MIGLabel: "all-1g.5gb"})}, migPlan("all-3g.20gb", "a-1"), testDetection(),
			StatusPass, "a-1", ""},
		{"a switch to the DRA stack counts every GPU pod",
			[]runtime.Object{labelled("a-1", nil), cuda}, dra(testPlan(nil, false)), withClusterPolicy(testDetection()),
			StatusFail, "default/cuda on node a-1", "--force"},
		{"a switch back from the DRA stack counts the pods holding claims",
			[]runtime.Object{labelled("a-1", nil), claimPod("ml", "train", "a-1", "train-gpu"), allocated("ml", "train-gpu", plan.DRADriverName, "a-1", false)},
			testPlan(nil, false), func() *detect.Result {
				d := testDetection()
				d.Existing.GPUClusters = []string{plan.GPUClusterName}
				return d
			}(),
			StatusFail, "ml/train on node a-1", ""},
		{"a sharing change on a node with a GPU pod is refused",
			[]runtime.Object{labelled("a-1", timeSliced), cuda}, sharing(testPlan(nil, false), "mps-2"), testDetection(),
			StatusFail, "default/cuda on node a-1", ""},
		{"sharing as it is passes",
			[]runtime.Object{labelled("a-1", timeSliced), cuda}, sharing(testPlan(nil, false), "time-slicing-4"), testDetection(),
			StatusPass, "", ""},
		{"a plain install passes whatever runs", []runtime.Object{labelled("a-1", nil), cuda}, testPlan(nil, false), testDetection(), StatusPass, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv()
			env.Kube, _ = fakeKube(allowAll, tc.objects...)
			env.Plan, env.Detection = tc.plan, tc.detection
			r := run(t, GPUWorkCheck, env)
			expect(t, r, tc.status, tc.msg, tc.hint)
			if tc.status == StatusFail && strings.Count(r.Message, "\n") == 0 && !strings.Contains(r.Message, ":") {
				t.Errorf("the message does not say why: %q", r.Message)
			}
		})
	}
}
