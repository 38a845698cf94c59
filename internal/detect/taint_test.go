package detect

import (
	"context"
	"errors"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestAllSchedulableGPU(t *testing.T) {
	gpu := func(name string, extra ...nodeOpt) corev1.Node {
		return node(name, append([]nodeOpt{labels("nvidia.com/gpu.present", "true")}, extra...)...)
	}
	k3sServer := labels("node-role.kubernetes.io/control-plane", "true", "node-role.kubernetes.io/master", "true")
	tests := []struct {
		name     string
		nodes    []corev1.Node
		wantAll  bool
		wantOpen []string
	}{
		{"a single-node k3s box whose server has the GPU", nodes(gpu("k3s-server-1", k3sServer)), true, nil},
		{"kubeadm with GPU workers and no CPU worker: the tainted control plane takes no ordinary pod",
			nodes(node("cp", kubeadmControlPlane()), gpu("gpu-1"), gpu("gpu-2")), true, nil},
		{"kubeadm with a CPU worker", nodes(node("cp", kubeadmControlPlane()), gpu("gpu-1"), node("cpu-1")), false, []string{"cpu-1"}},
		{"a k3s server without GPUs takes ordinary pods", nodes(node("k3s-server-1", k3sServer), gpu("k3s-gpu-1")), false, []string{"k3s-server-1"}},
		{"a cordoned CPU node takes nothing", nodes(gpu("gpu-1"), node("cpu-1", cordoned())), true, nil},
		{"no GPU node: nothing to taint", nodes(node("cpu-1")), false, []string{"cpu-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Analyze(&Snapshot{Nodes: tc.nodes}).Scheduling
			if s.AllSchedulableGPU != tc.wantAll || !reflect.DeepEqual(s.OpenNodes, tc.wantOpen) {
				t.Errorf("allSchedulableGPU=%v open=%v, want %v %v", s.AllSchedulableGPU, s.OpenNodes, tc.wantAll, tc.wantOpen)
			}
		})
	}
}

func TestGPUNodeWorkloads(t *testing.T) {
	cluster := nodes(
		node("cp", kubeadmControlPlane()),
		node("gpu-1", labels("nvidia.com/gpu.present", "true", "pool", "gpu")),
		node("cpu-1", labels("pool", "cpu")),
	)
	gpuTol := corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	cpTol := corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name      string
		nodes     []corev1.Node
		templates []PodTemplate
		pending   []PodTemplate
		want      []GPUNodeWorkload
	}{
		{
			name:      "a plain Deployment may move to the CPU worker",
			nodes:     cluster,
			templates: []PodTemplate{{Kind: "Deployment", Namespace: "web", Name: "shop"}},
			want:      []GPUNodeWorkload{{Kind: "Deployment", Namespace: "web", Name: "shop", OtherNodes: true}},
		},
		{
			name:      "a Deployment pinned to the GPU pool has nowhere else to go",
			nodes:     cluster,
			templates: []PodTemplate{{Kind: "Deployment", Namespace: "web", Name: "pinned", NodeSelector: map[string]string{"pool": "gpu"}}},
			want:      []GPUNodeWorkload{{Kind: "Deployment", Namespace: "web", Name: "pinned"}},
		},
		{
			name:  "required node affinity counts like a node selector",
			nodes: cluster,
			templates: []PodTemplate{{Kind: "StatefulSet", Namespace: "db", Name: "pg", Affinity: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "nvidia.com/gpu.present", Operator: corev1.NodeSelectorOpExists}}}}}}},
			want: []GPUNodeWorkload{{Kind: "StatefulSet", Namespace: "db", Name: "pg"}},
		},
		{
			name:      "a GPU Deployment as tutorials write it",
			nodes:     cluster,
			templates: []PodTemplate{{Kind: "Deployment", Namespace: "ml", Name: "train", RequestsGPU: true}},
			want:      []GPUNodeWorkload{{Kind: "Deployment", Namespace: "ml", Name: "train", RequestsGPU: true}},
		},
		{
			name:  "workloads that tolerate the taint, or never reach a GPU node, are not concerned",
			nodes: cluster,
			templates: []PodTemplate{
				{Kind: "Deployment", Namespace: "ml", Name: "tolerant", RequestsGPU: true, Tolerations: []corev1.Toleration{gpuTol}},
				{Kind: "Deployment", Namespace: "web", Name: "cpu-only", NodeSelector: map[string]string{"pool": "cpu"}},
				{Kind: "DaemonSet", Namespace: "kube-system", Name: "everything", Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
			},
		},
		{
			name:      "the control plane is room for what tolerates its taint",
			nodes:     nodes(node("cp", kubeadmControlPlane()), node("gpu-1", labels("nvidia.com/gpu.present", "true"))),
			templates: []PodTemplate{{Kind: "Deployment", Namespace: "kube-system", Name: "coredns", Tolerations: []corev1.Toleration{cpTol}}, {Kind: "Deployment", Namespace: "web", Name: "shop"}},
			want: []GPUNodeWorkload{
				{Kind: "Deployment", Namespace: "kube-system", Name: "coredns", OtherNodes: true},
				{Kind: "Deployment", Namespace: "web", Name: "shop"},
			},
		},
		{
			name:      "a node already tainted nvidia.com/gpu is nothing gpuctl changes",
			nodes:     nodes(node("gpu-1", labels("nvidia.com/gpu.present", "true"), taint("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)), node("cpu-1")),
			templates: []PodTemplate{{Kind: "Deployment", Namespace: "web", Name: "shop"}},
		},
		{
			name:      "Pending GPU pods without the toleration are counted under their workload",
			nodes:     cluster,
			templates: []PodTemplate{{Kind: "Deployment", Namespace: "ml", Name: "train", RequestsGPU: true}},
			pending: []PodTemplate{
				{Kind: "Deployment", Namespace: "ml", Name: "train", RequestsGPU: true},
				{Kind: "Deployment", Namespace: "ml", Name: "train", RequestsGPU: true},
				{Kind: "Pod", Namespace: "ml", Name: "notebook", RequestsGPU: true},
				{Kind: "Pod", Namespace: "ml", Name: "tolerated", RequestsGPU: true, Tolerations: []corev1.Toleration{gpuTol}},
			},
			want: []GPUNodeWorkload{
				{Kind: "Deployment", Namespace: "ml", Name: "train", RequestsGPU: true, PendingPods: 2},
				{Kind: "Pod", Namespace: "ml", Name: "notebook", RequestsGPU: true, PendingPods: 1},
			},
		},
		{
			name:      "no GPU node: nothing is concerned",
			nodes:     nodes(node("cpu-1")),
			templates: []PodTemplate{{Kind: "Deployment", Namespace: "web", Name: "shop"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Analyze(&Snapshot{Nodes: tc.nodes, PodTemplates: tc.templates, PendingGPUPods: tc.pending}).GPUNodeWorkloads
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("workloads = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestPodOwner(t *testing.T) {
	yes := true
	pod := func(kind, name string, lbls map[string]string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-1", Labels: lbls}}
		if kind != "" {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: name, Controller: &yes}}
		}
		return p
	}
	tests := []struct {
		name           string
		pod            *corev1.Pod
		kind, workload string
	}{
		{"a ReplicaSet's pod is its Deployment's", pod("ReplicaSet", "train-5d8f9c7b6", map[string]string{"pod-template-hash": "5d8f9c7b6"}), "Deployment", "train"},
		{"a ReplicaSet without the hash label is itself", pod("ReplicaSet", "rs", nil), "ReplicaSet", "rs"},
		{"a Job's pod is its Job's", pod("Job", "batch-1", nil), "Job", "batch-1"},
		{"a bare pod is itself", pod("", "", nil), "Pod", "p-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if k, n := podOwner(tc.pod); k != tc.kind || n != tc.workload {
				t.Errorf("owner = %s/%s, want %s/%s", k, n, tc.kind, tc.workload)
			}
		})
	}
}

func TestProbeGPUToleration(t *testing.T) {
	ctx := context.Background()
	ert := func(kube *fake.Clientset) {
		// What ExtendedResourceToleration does, for the fake clientset.
		kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).DeepCopy()
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
			return true, p, nil
		})
	}
	forbidden := func(kube *fake.Clientset) {
		kube.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("RBAC"))
		})
	}
	tests := []struct {
		name    string
		react   func(*fake.Clientset)
		want    *bool
		warning bool
	}{
		{"the plugin adds the toleration", ert, ptrBool(true), false},
		{"nothing adds it", nil, ptrBool(false), false},
		{"a refused dry run leaves it unknown, with a warning", forbidden, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset()
			if tc.react != nil {
				tc.react(kube)
			}
			s, err := Gather(ctx, Clients{Kube: kube, Discovery: discoveryWith(kube, "v1.37.2"), Dynamic: dynamicClient()})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s.GPUToleration, tc.want) || anyContains(s.Warnings, "GPU toleration") != tc.warning {
				t.Errorf("GPUToleration = %v, warnings = %v", s.GPUToleration, s.Warnings)
			}
			var created *corev1.Pod
			for _, a := range kube.Actions() {
				if c, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "pods" {
					created = c.GetObject().(*corev1.Pod)
					if opts := c.(k8stesting.CreateActionImpl).CreateOptions; len(opts.DryRun) != 1 || opts.DryRun[0] != metav1.DryRunAll {
						t.Errorf("create options = %+v, want dryRun=All", opts)
					}
				}
			}
			if created == nil || created.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"] != resource.MustParse("1") || created.Labels[ProbeLabel] == "" {
				t.Errorf("probe pod = %+v", created)
			}
		})
	}
}

func TestMutatingAdmissionPolicyDiscovery(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		resources []string
		group     bool
		want      bool
	}{
		{"served at v1 (Kubernetes 1.36 and newer)", []string{"validatingadmissionpolicies", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"}, true, true},
		{"admissionregistration.k8s.io/v1 without it (Kubernetes 1.35)", []string{"validatingadmissionpolicies"}, true, false},
		{"the group is not served at all", nil, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset()
			disc := discoveryWith(kube, "v1.37.2")
			if tc.group {
				list := &metav1.APIResourceList{GroupVersion: "admissionregistration.k8s.io/v1"}
				for _, r := range tc.resources {
					list.APIResources = append(list.APIResources, metav1.APIResource{Name: r})
				}
				disc.Resources = append(disc.Resources, list)
			}
			s, err := Gather(ctx, Clients{Kube: kube, Discovery: disc, Dynamic: dynamicClient()})
			if err != nil {
				t.Fatal(err)
			}
			if s.MutatingAdmissionPolicy == nil || *s.MutatingAdmissionPolicy != tc.want {
				t.Errorf("MutatingAdmissionPolicy = %v, want %v", s.MutatingAdmissionPolicy, tc.want)
			}
			a := Analyze(s).Admission.MutatingAdmissionPolicy
			if a == nil || a.Detected != tc.want {
				t.Errorf("finding = %+v", a)
			}
		})
	}
}

func TestGatherPodTemplates(t *testing.T) {
	replicas := func(n int32) *int32 { return &n }
	gpuLimits := corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}
	objs := []runtime.Object{
		deployment("ml", "train", replicas(1), corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: gpuLimits}}}),
		deployment("web", "scaled-down", replicas(0), corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}),
		statefulSet("db", "pg", corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i", Resources: gpuLimits}}, Containers: []corev1.Container{{Name: "c"}}}),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "waiting"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: gpuLimits}}}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "running"}, Spec: corev1.PodSpec{NodeName: "gpu-1", Containers: []corev1.Container{{Name: "c", Resources: gpuLimits}}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "cpu-waiting"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
	}
	kube := fake.NewClientset(objs...)
	s, err := Gather(context.Background(), Clients{Kube: kube, Discovery: discoveryWith(kube, "v1.37.2"), Dynamic: dynamicClient()})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, pt := range s.PodTemplates {
		got[pt.Kind+"/"+pt.Namespace+"/"+pt.Name] = pt.RequestsGPU
	}
	if want := map[string]bool{"Deployment/ml/train": true, "StatefulSet/db/pg": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("pod templates = %v, want %v (scaled-down Deployments left out)", got, want)
	}
	if len(s.PendingGPUPods) != 1 || s.PendingGPUPods[0].Name != "waiting" || s.PendingGPUPods[0].Kind != "Pod" {
		t.Errorf("pending GPU pods = %+v, want ml/waiting only", s.PendingGPUPods)
	}
}

func ptrBool(b bool) *bool { return &b }

func deployment(ns, name string, replicas *int32, spec corev1.PodSpec) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: replicas, Template: corev1.PodTemplateSpec{Spec: spec}}}
}

func statefulSet(ns, name string, spec corev1.PodSpec) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{Template: corev1.PodTemplateSpec{Spec: spec}}}
}
