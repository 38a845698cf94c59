package detect

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// GPUResource is the extended resource NVIDIA's device plugin advertises, and the key of the GPU taint
// (NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0 tolerates that key).
const GPUResource = "nvidia.com/gpu"

// Admission is what the API server does to a pod that requests GPUs, as far as the GPU taint is concerned.
type Admission struct {
	// GPUToleration: the API server adds a toleration of nvidia.com/gpu:NoSchedule to a pod that requests
	// nvidia.com/gpu, as the ExtendedResourceToleration admission plugin does (on GKE, EKS and AKS; off in
	// upstream Kubernetes, kubeadm, k3s and RKE2). Found by a server-side dry-run create of such a pod; nil
	// when the dry run was refused or failed, so it is not known.
	GPUToleration *Finding `json:"gpuToleration,omitempty"`
	// MutatingAdmissionPolicy: the cluster serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy
	// (GA and on by default since Kubernetes 1.36, KEP-3962), so gpuctl can add that toleration itself
	// without a webhook server; nil when discovery could not tell.
	MutatingAdmissionPolicy *Finding `json:"mutatingAdmissionPolicy,omitempty"`
}

// PodTemplate is what the GPU taint needs to know of a workload's pods: where they may be scheduled,
// what they tolerate and whether they request GPUs. Gather keeps one per Deployment, StatefulSet and
// DaemonSet, and one per unscheduled Pending pod that requests GPUs.
type PodTemplate struct {
	// Kind is Deployment, StatefulSet, DaemonSet, or for a Pending pod its controller's kind (a
	// ReplicaSet's pod is named by its Deployment) or Pod.
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// NodeSelector, Affinity (required node affinity) and Tolerations are the pod spec's.
	NodeSelector map[string]string    `json:"nodeSelector,omitempty"`
	Affinity     *corev1.NodeSelector `json:"affinity,omitempty"`
	Tolerations  []corev1.Toleration  `json:"tolerations,omitempty"`
	// RequestsGPU: a container or init container requests (or limits) nvidia.com/gpu.
	RequestsGPU bool `json:"requestsGPU,omitempty"`
}

// GPUNodeWorkload is a workload whose pods may run on GPU nodes today and do not tolerate the GPU taint:
// once gpuctl taints the GPU nodes, its new pods stay off them unless the API server adds the toleration.
type GPUNodeWorkload struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// RequestsGPU: its pods request nvidia.com/gpu, so they can only run on GPU nodes.
	RequestsGPU bool `json:"requestsGPU,omitempty"`
	// OtherNodes: its pods also fit a schedulable node without GPUs (node selector, required node
	// affinity, that node's taints), where they can go once the GPU nodes are tainted.
	OtherNodes bool `json:"otherNodes,omitempty"`
	// PendingPods counts its pods that request GPUs and wait unscheduled without the toleration: admission
	// adds tolerations only to pods created after it is in place, so these would wait for good.
	PendingPods int `json:"pendingPods,omitempty"`
}

// templateRequestsGPU reports whether any container or init container requests or limits nvidia.com/gpu
// (an extended resource's request defaults to its limit).
func templateRequestsGPU(spec *corev1.PodSpec) bool {
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			if _, ok := c.Resources.Requests[GPUResource]; ok {
				return true
			}
			if _, ok := c.Resources.Limits[GPUResource]; ok {
				return true
			}
		}
	}
	return false
}

func podTemplate(kind, namespace, name string, spec *corev1.PodSpec) PodTemplate {
	t := PodTemplate{Kind: kind, Namespace: namespace, Name: name, NodeSelector: spec.NodeSelector,
		Tolerations: spec.Tolerations, RequestsGPU: templateRequestsGPU(spec)}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil {
		t.Affinity = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return t
}

// podOwner names the workload a pod belongs to: a ReplicaSet's pod by its Deployment (the Deployment
// controller names each ReplicaSet <deployment>-<pod-template-hash>), otherwise its controller, or the
// pod itself.
func podOwner(p *corev1.Pod) (kind, name string) {
	for _, ref := range p.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		if hash := p.Labels["pod-template-hash"]; ref.Kind == "ReplicaSet" && hash != "" && strings.HasSuffix(ref.Name, "-"+hash) {
			return "Deployment", strings.TrimSuffix(ref.Name, "-"+hash)
		}
		return ref.Kind, ref.Name
	}
	return "Pod", p.Name
}

// gpuTaintSpec is the taint gpuctl adds, as the analysis matches it.
func gpuTaintSpec() corev1.Taint {
	return corev1.Taint{Key: GPUResource, Value: "present", Effect: corev1.TaintEffectNoSchedule}
}

// toleratesGPUTaint: the tolerations let a pod onto a node tainted nvidia.com/gpu=present:NoSchedule.
func toleratesGPUTaint(tols []corev1.Toleration) bool {
	t := gpuTaintSpec()
	return corev1helpers.TolerationsTolerateTaint(klog.Logger{}, tols, &t, false)
}

// fits reports whether a pod of t may be scheduled on n today: the node is not cordoned, the node
// selector and required node affinity match it, and every NoSchedule or NoExecute taint it has is
// tolerated.
func (t *PodTemplate) fits(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	var aff *corev1.Affinity
	if t.Affinity != nil {
		aff = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: t.Affinity}}
	}
	if ok, err := nodeaffinity.NewRequiredNodeAffinity(t.NodeSelector, aff).Match(n); err != nil || !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Logger{}, n.Spec.Taints, t.Tolerations, func(taint *corev1.Taint) bool {
		return blockingTaint(*taint)
	}, false)
	return !untolerated
}

// gpuNodeWorkloads are the workloads (and Pending GPU pods) whose pods fit a GPU node today without
// tolerating the GPU taint, with whether they also fit a node without GPUs. gpuctl's own namespace is
// not left out here: the planner knows which namespace is its own.
func gpuNodeWorkloads(nodes []corev1.Node, gpus map[string][]Evidence, templates, pending []PodTemplate) []GPUNodeWorkload {
	var gpuNodes, others []*corev1.Node
	for i := range nodes {
		if _, ok := gpus[nodes[i].Name]; ok {
			gpuNodes = append(gpuNodes, &nodes[i])
		} else {
			others = append(others, &nodes[i])
		}
	}
	if len(gpuNodes) == 0 {
		return nil
	}
	ws := &workloadSet{others: others, byKey: map[string]*GPUNodeWorkload{}}
	for i := range templates {
		t := &templates[i]
		if toleratesGPUTaint(t.Tolerations) || !t.fitsAny(gpuNodes) {
			continue
		}
		ws.add(t)
	}
	for i := range pending {
		t := &pending[i]
		// A Pending GPU pod waits for allocatable GPUs, which only the device plugin brings: it counts
		// whatever GPU node it would fit once they are there, so the node's fit is not asked.
		if toleratesGPUTaint(t.Tolerations) || !t.RequestsGPU {
			continue
		}
		ws.add(t).PendingPods++
	}
	return ws.sorted()
}

// fitsAny reports whether a pod of t may be scheduled on one of nodes today (fits).
func (t *PodTemplate) fitsAny(nodes []*corev1.Node) bool {
	for _, n := range nodes {
		if t.fits(n) {
			return true
		}
	}
	return false
}

// workloadSet gathers gpuNodeWorkloads' workloads, each once, in the order they are found.
type workloadSet struct {
	// others are the nodes without GPUs.
	others []*corev1.Node
	byKey  map[string]*GPUNodeWorkload
	list   []*GPUNodeWorkload
}

// add returns the workload of t's pods, added on first sight with whether they also fit a node
// without GPUs.
func (s *workloadSet) add(t *PodTemplate) *GPUNodeWorkload {
	key := t.Kind + "/" + t.Namespace + "/" + t.Name
	if w, ok := s.byKey[key]; ok {
		return w
	}
	w := &GPUNodeWorkload{Kind: t.Kind, Namespace: t.Namespace, Name: t.Name, RequestsGPU: t.RequestsGPU}
	// A GPU pod fits no node without GPUs; anything else may move there.
	w.OtherNodes = !t.RequestsGPU && t.fitsAny(s.others)
	s.byKey[key] = w
	s.list = append(s.list, w)
	return w
}

// sorted are the workloads by namespace, kind and name.
func (s *workloadSet) sorted() []GPUNodeWorkload {
	out := s.list
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	var res []GPUNodeWorkload
	for _, w := range out {
		res = append(res, *w)
	}
	return res
}

// admission turns the snapshot's probe and discovery answers into findings.
func admission(s *Snapshot) Admission {
	var a Admission
	if s.GPUToleration != nil {
		ev := []Evidence{{Signal: "dry-run create", Value: "a pod requesting " + GPUResource + " came back without a toleration for it", Source: "API server"}}
		if *s.GPUToleration {
			ev[0].Value = "a pod requesting " + GPUResource + " came back tolerating " + GPUResource + ":NoSchedule (ExtendedResourceToleration)"
		}
		a.GPUToleration = &Finding{Detected: *s.GPUToleration, Evidence: ev}
	}
	if s.MutatingAdmissionPolicy != nil {
		ev := []Evidence{}
		if *s.MutatingAdmissionPolicy {
			ev = append(ev, Evidence{Signal: "api resource", Value: "admissionregistration.k8s.io/v1 mutatingadmissionpolicies", Source: "API discovery"})
		}
		a.MutatingAdmissionPolicy = &Finding{Detected: *s.MutatingAdmissionPolicy, Evidence: ev}
	}
	return a
}
