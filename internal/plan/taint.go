package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuctl/gpuctl/internal/detect"
)

// How pods that request GPUs come to tolerate the GPU taint (Taint.Toleration).
const (
	// TolerationPlugin: the API server's ExtendedResourceToleration admission plugin adds it (GKE, EKS and
	// AKS enable it; upstream Kubernetes, kubeadm, k3s, RKE2 and OpenShift do not).
	TolerationPlugin = "ExtendedResourceToleration"
	// TolerationPolicy: gpuctl's MutatingAdmissionPolicy in the operator release adds it.
	TolerationPolicy = "MutatingAdmissionPolicy"
)

// PolicyValue is the operator chart's value that turns gpuctl's MutatingAdmissionPolicy on
// (charts/gpu-operator: gpuTolerationPolicy.enabled).
const PolicyValue = "gpuTolerationPolicy"

// gpuTolerationText is the toleration a pod needs on tainted GPU nodes, as a hint prints it.
const gpuTolerationText = "{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}"

// TaintWorkload is a workload running today whose pods do not tolerate the GPU taint, and what the
// taint does to it.
type TaintWorkload struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Effect says what happens to its pods once the GPU nodes are tainted.
	Effect string `json:"effect"`
	// Stranded: its new pods could not be scheduled anywhere (or its Pending pods never), so the taint
	// must not go ahead as planned; preflight refuses it.
	Stranded bool `json:"stranded,omitempty"`
}

func (w TaintWorkload) String() string { return w.Kind + " " + w.Namespace + "/" + w.Name }

// TaintOptions are the choices DecideTaint weighs.
type TaintOptions struct {
	// Force is --taint: taint even where gpuctl would not by default.
	Force bool
	// NoTaint is --no-taint.
	NoTaint bool
	// PolicyAvailable: gpuctl can install its MutatingAdmissionPolicy (with the operator chart; not on
	// OpenShift, where OLM installs the operator).
	PolicyAvailable bool
	// Own are the namespaces gpuctl installs into: what runs there is gpuctl's and planned separately.
	Own []string
	// NoPolicy, when set, says why gpuctl's policy is not available, in place of "on this platform
	// gpuctl cannot install" (gpuctl taint installs nothing: only a policy already in force counts).
	NoPolicy string
}

// TaintDecision is whether gpuctl taints the GPU nodes, why, and what that means for what runs.
type TaintDecision struct {
	// Taint is true when the taint step runs; Skip says why it does not.
	Taint bool
	Skip  string
	// Toleration is how GPU pods get the toleration (TolerationPlugin, TolerationPolicy or "": they
	// must carry it themselves); Policy is true when gpuctl installs its MutatingAdmissionPolicy for it.
	Toleration string
	Policy     bool
	// Why is the reason for the taint, when it runs.
	Why string
	// Default is, when Force overrode it, why gpuctl would not have tainted by default (Skip's
	// reason without the flag that overrides it).
	Default string
	// Workloads are the workloads the taint concerns; Stranded lists those it would strand.
	Workloads []TaintWorkload
	Stranded  []TaintWorkload
}

// DecideTaint decides, from what detection found, whether the GPU nodes are tainted:
//
//   - not where every schedulable node is a GPU node (control-plane nodes that take pods count: a k3s
//     server with the GPU is a whole cluster), since everything that tolerates nothing would have nowhere
//     to run; GKE taints GPU nodes only in clusters that also have nodes without GPUs
//     (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus);
//   - not where pods that request GPUs, written as tutorials write them (resources.limits nvidia.com/gpu:
//     1, no toleration), would not get the toleration: the API server adds it with the
//     ExtendedResourceToleration admission plugin, or, where the plugin is off and the cluster serves
//     MutatingAdmissionPolicy (Kubernetes 1.36+, KEP-3962), gpuctl installs a policy that does the same;
//   - --taint taints anyway, --no-taint never.
//
// Workloads whose pods do not tolerate the taint are listed; those it would strand (no node without
// GPUs fits them, or they request GPUs and nothing adds the toleration, or they already wait unscheduled
// for GPUs) are Stranded, which preflight refuses.
func DecideTaint(det *detect.Result, o TaintOptions) TaintDecision {
	var d TaintDecision
	if o.NoTaint {
		d.Skip = "--no-taint"
		return d
	}
	a := det.Admission
	plugin := a.GPUToleration != nil && a.GPUToleration.Detected
	served := a.MutatingAdmissionPolicy != nil && a.MutatingAdmissionPolicy.Detected
	switch {
	case plugin:
		d.Toleration = TolerationPlugin
	case served && o.PolicyAvailable:
		d.Toleration, d.Policy = TolerationPolicy, true
	}
	switch {
	case det.Scheduling.AllSchedulableGPU:
		d.Default = "every schedulable node is a GPU node, so pods that do not tolerate " + TaintKey + " would have nowhere to run " +
			"(GKE, too, taints GPU nodes only in clusters that also have nodes without GPUs)"
	case d.Toleration == "":
		d.Default = noTolerationReason(a, o) + ": GPU pods would need " + gpuTolerationText +
			" in their spec to run on tainted GPU nodes"
	}
	switch {
	case o.Force:
		d.Why = "--taint"
	case d.Default != "":
		d.Skip, d.Default = d.Default+"; --taint taints them anyway", ""
		d.Toleration, d.Policy = "", false
		return d
	}
	d.Taint = true
	switch d.Toleration {
	case TolerationPlugin:
		d.Why = joinWhy(d.Why, "the API server adds the toleration to pods that request GPUs (ExtendedResourceToleration)")
	case TolerationPolicy:
		d.Why = joinWhy(d.Why, "gpuctl's MutatingAdmissionPolicy adds the toleration to pods that request GPUs, as ExtendedResourceToleration would")
	default:
		d.Why = joinWhy(d.Why, "pods that request GPUs must carry "+gpuTolerationText+" themselves")
	}
	d.Workloads, d.Stranded = taintWorkloads(det.GPUNodeWorkloads, d.Toleration, o.Own)
	return d
}

// workloadsWhy names, for the taint step's Why, the workloads the taint concerns and what it does to them.
func workloadsWhy(ws []TaintWorkload) string {
	const shown = 5
	if len(ws) == 0 {
		return ""
	}
	var parts []string
	for i, w := range ws {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more (-o json lists them)", len(ws)-shown))
			break
		}
		parts = append(parts, w.String()+": "+w.Effect)
	}
	return "; running today without the toleration: " + strings.Join(parts, "; ")
}

func joinWhy(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// noTolerationReason says why nothing would add the toleration.
func noTolerationReason(a detect.Admission, o TaintOptions) string {
	plugin := "the API server does not add the GPU toleration to pods that request GPUs (ExtendedResourceToleration is off)"
	if a.GPUToleration == nil {
		plugin = "gpuctl could not find out whether the API server adds the GPU toleration to pods that request GPUs (its dry-run pod was refused)"
	}
	switch {
	case !o.PolicyAvailable && o.NoPolicy != "":
		return plugin + ", and " + o.NoPolicy
	case !o.PolicyAvailable:
		return plugin + ", and on this platform gpuctl cannot install a MutatingAdmissionPolicy in its place"
	case a.MutatingAdmissionPolicy == nil:
		return plugin + ", and whether the cluster serves MutatingAdmissionPolicy is not known"
	default:
		return plugin + ", and the cluster does not serve MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, Kubernetes 1.36 and newer) for gpuctl to add it"
	}
}

// taintWorkloads says what the taint does to each workload that does not tolerate it.
func taintWorkloads(ws []detect.GPUNodeWorkload, toleration string, own []string) (all, stranded []TaintWorkload) {
	for _, w := range ws {
		if slices.Contains(own, w.Namespace) {
			continue
		}
		tw := TaintWorkload{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name}
		switch {
		case w.PendingPods > 0:
			tw.Stranded = true
			tw.Effect = fmt.Sprintf("%d pods wait unscheduled for GPUs without the toleration, and admission adds tolerations only to new pods: they would wait for good; delete them after the install so that their controller creates them again", w.PendingPods)
			if toleration == "" {
				tw.Effect = fmt.Sprintf("%d pods wait unscheduled for GPUs without the toleration: they would wait for good", w.PendingPods)
			}
		case w.Kind == "DaemonSet":
			tw.Effect = "its running pods stay; GPU nodes that join later get none"
			if w.RequestsGPU && toleration != "" {
				tw.Effect = "its new pods get the toleration from " + toleration
			}
		case w.RequestsGPU && toleration != "":
			tw.Effect = "its new pods get the toleration from " + toleration
		case w.RequestsGPU:
			tw.Stranded = true
			tw.Effect = "its pods request GPUs and nothing adds the toleration: new ones would stay Pending"
		case w.OtherNodes:
			tw.Effect = "its new pods go to nodes without GPUs"
		default:
			tw.Stranded = true
			tw.Effect = "no schedulable node without GPUs fits its pods: new ones would stay Pending"
		}
		all = append(all, tw)
		if tw.Stranded {
			stranded = append(stranded, tw)
		}
	}
	return all, stranded
}

// StrandedMessage is one line naming what the taint would strand, and StrandedHint the ways out; the
// preflight check and the run-time safety check say the same.
func StrandedMessage(ws []TaintWorkload) string {
	var parts []string
	for _, w := range ws {
		if w.Stranded {
			parts = append(parts, w.String()+" ("+w.Effect+")")
		}
	}
	return "the GPU taint " + TaintKey + "=" + TaintValue + ":" + TaintEffect + " would strand " + strings.Join(parts, "; ")
}

// StrandedHint is what to do about stranded workloads.
const StrandedHint = "install with --no-taint, or add " + gpuTolerationText + " to those pod templates (and delete Pending GPU pods after the install so that they are created again)"
