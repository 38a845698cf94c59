package health

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// hints recognises failure patterns in what the diagnosis gathered. Each rule yields at most one Hint, naming
// every object it applies to, so a 100-node failure gives one line per cause, not per node. The patterns and
// advice come from NVIDIA/gpu-operator GitHub issues up to v26.7.0, cited per rule below.
func (d *diagnosis) hints() []Hint {
	var hs hintList
	d.podHints(&hs)
	d.nodeHints(&hs)
	d.daemonSetHints(&hs)
	return hs
}

// hintList collects the hints of the rules that apply to something.
type hintList []Hint

// add adds the rule's hint when it names objects.
func (hs *hintList) add(pattern, message string, objects []string) {
	if len(objects) > 0 {
		*hs = append(*hs, Hint{Pattern: pattern, Message: message, Objects: objects})
	}
}

// podFindings are the stuck pods by what holds them.
type podFindings struct {
	// pull are images that cannot be pulled, taint pods the GPU taint keeps from scheduling, crash
	// containers in a crash loop.
	pull, taint, crash []string
	// blocked are the nodes whose validator waits on each init container.
	blocked map[string][]string
}

// stuckPodFindings sorts the stuck pods by what holds them: an image pull, a crash loop, the GPU taint,
// or a validator init container that has not passed.
func (d *diagnosis) stuckPodFindings() podFindings {
	f := podFindings{blocked: make(map[string][]string)}
	for _, p := range d.stuckPods {
		ref := "pod " + p.Namespace + "/" + p.Name
		for _, s := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			w := s.State.Waiting
			if w == nil {
				continue
			}
			switch w.Reason {
			case "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull":
				f.pull = append(f.pull, fmt.Sprintf("%s image %s", ref, s.Image))
			case "CrashLoopBackOff":
				f.crash = append(f.crash, ref+" container "+s.Name)
			}
		}
		// The scheduler's message names the taints it could not tolerate, e.g.
		// "0/3 nodes are available: 3 node(s) had untolerated taint {nvidia.com/gpu: present}."
		if c := podCondition(p, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse &&
			strings.Contains(c.Message, "untolerated taint {nvidia.com/gpu") {
			f.taint = append(f.taint, ref)
		}
		if p.Labels["app"] == validatorApp {
			if c := blockingInit(p); c != "" {
				f.blocked[c] = append(f.blocked[c], "node "+p.Spec.NodeName)
			}
		}
	}
	return f
}

// podHints are the rules about stuck pods: images, the GPU taint, each validator stage, crash loops.
func (d *diagnosis) podHints(hs *hintList) {
	f := d.stuckPodFindings()
	// NVIDIA/gpu-operator#91, #299, #1501, #2884; NVIDIA/cloud-native-docs gpu-operator/upgrade.rst: registries,
	// mirrors, pull secrets.
	hs.add("image-pull", "images cannot be pulled: check the image name and tag, that the nodes can reach the registry, "+
		"and the image pull secrets (nvcr.io/nvaie images need an NGC secret); in an air-gapped cluster point every "+
		"*.repository value at your mirror", f.pull)
	// NVIDIA/gpu-operator#37, #26, #801: the operator, NFD master and gc tolerate only the control-plane taint by
	// default.
	hs.add("untolerated-gpu-taint", "pods cannot schedule because they do not tolerate the nvidia.com/gpu taint: give them "+
		"the toleration {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule} (the operator, the NFD master and NFD gc "+
		"need it when every schedulable node is a GPU node), or remove the taint with `gpuctl untaint`", f.taint)
	// Validator init containers (NVIDIA/gpu-operator controllers/state_manager.go@v26.7.0); NVIDIA/gpu-operator#280,
	// #378, #448 (driver), NVIDIA/cloud-native-docs#98 (nouveau), #141, #497, #1142 (Secure Boot), #126, #381, #2150
	// (host driver).
	hs.add("driver-not-ready", "the NVIDIA driver is not ready: the validator's driver-validation waits for the driver pod "+
		"(nvidia-driver-daemonset) on the node. Read the logs of its nvidia-driver-ctr and k8s-driver-manager containers; "+
		"common causes are missing kernel headers or no access to package mirrors, an unsupported kernel, Secure Boot "+
		"rejecting the unsigned module (use precompiled or host drivers), or nouveau loaded. If the host already has a "+
		"driver, set driver.enabled=false", f.blocked[initDriverValidation])
	// NVIDIA/gpu-operator#413, #432, #1651, #992, #473, #1323.
	hs.add("toolkit-not-ready", "the NVIDIA container toolkit is not ready: read the nvidia-container-toolkit-daemonset "+
		"logs; on RKE2, k3s, MicroK8s and k0s the toolkit's CONTAINERD_SOCKET and CONTAINERD_CONFIG must point at the "+
		"distribution's containerd", f.blocked[initToolkitValidation])
	// cuda-validation (NVIDIA/gpu-operator cmd/nvidia-validator/main.go@v26.7.0); NVIDIA/gpu-operator#2685, #1043,
	// #1947.
	hs.add("cuda-validation-failing", "the CUDA test workload does not pass: look at the nvidia-cuda-validator pod; on "+
		"NVSwitch systems (HGX/DGX) the fabric manager must run, and \"CUDA driver version is insufficient\" means the "+
		"driver is older than the validator's CUDA", f.blocked[initCUDAValidation])
	// plugin-validation (NVIDIA/gpu-operator cmd/nvidia-validator/main.go@v26.7.0).
	hs.add("device-plugin-not-ready", "the device plugin does not advertise nvidia.com/gpu yet: look at the "+
		"nvidia-device-plugin-daemonset pod on the node", f.blocked[initPluginValidation])
	hs.add("crash-loop", "containers keep crashing: their exit codes and last log lines are above", f.crash)
}

// nodeHints are the rules about the GPU nodes: no NFD PCI label, NotReady, operands turned off.
func (d *diagnosis) nodeHints(hs *hintList) {
	var noPCI, notReady, disabled []string
	for _, name := range d.names {
		n := d.nodes[name]
		if n == nil {
			continue
		}
		if !hasAnyLabel(n.Labels, NFDGPULabels()) {
			noPCI = append(noPCI, "node "+name)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				notReady = append(notReady, "node "+name)
			}
		}
		if n.Labels[deployLabelPrefix+"operands"] == "false" {
			disabled = append(disabled, "node "+name)
		}
	}
	// NVIDIA/gpu-operator controllers/state_manager.go@v26.7.0; NVIDIA/gpu-operator#149, #423, #87, #1038.
	hs.add("nfd-labels-missing", "NFD has not labelled these nodes as having an NVIDIA PCI device: install Node Feature "+
		"Discovery, or check that its worker runs on them (it must tolerate the nvidia.com/gpu taint) and that its PCI "+
		"deviceClassWhitelist includes 0300 and 0302", noPCI)
	hs.add("node-not-ready", "nodes are NotReady, so no pod starts there: check the kubelet and the node's conditions", notReady)
	// NVIDIA/gpu-operator controllers/state_manager.go@v26.7.0: nvidia.com/gpu.deploy.operands=false removes every
	// operand from the node.
	hs.add("operands-disabled", "nvidia.com/gpu.deploy.operands=false keeps every GPU Operator operand off these nodes: "+
		"remove the label to let the operator manage them", disabled)
}

// daemonSetHints are the rules about the operand DaemonSets: targeting no node, and refused by Pod
// Security Admission.
func (d *diagnosis) daemonSetHints(hs *hintList) {
	var empty []string
	for _, ds := range d.emptyDaemonSets {
		empty = append(empty, "daemonset "+ds.Namespace+"/"+ds.Name)
	}
	// NVIDIA/gpu-operator controllers/state_manager.go@v26.7.0: operand DaemonSets select
	// nvidia.com/gpu.deploy.<operand>=true, set by the operator on nvidia.com/gpu.present nodes.
	hs.add("no-target-nodes", "operand DaemonSets target no node: the operator labels nodes nvidia.com/gpu.deploy.<operand>=true "+
		"only once they are labelled "+GPUPresentLabel+"=true (from NFD's PCI labels); check those labels and that no "+
		"nvidia.com/gpu.deploy.* label is set to false", empty)

	var psa []string
	for i := range d.daemonSets {
		for _, e := range d.events["DaemonSet/"+d.daemonSets[i].Name] {
			if e.Reason == "FailedCreate" && strings.Contains(e.Message, "violates PodSecurity") {
				psa = append(psa, "daemonset "+d.ns+"/"+d.daemonSets[i].Name)
				break
			}
		}
	}
	// NVIDIA/gpu-operator#314, #185: the driver and toolkit need privileged, hostPID and hostPath.
	hs.add("pod-security", "Pod Security Admission rejects the operand pods: label the namespace "+
		"pod-security.kubernetes.io/enforce=privileged", psa)
}

// blockingInit returns the name of the first init container of p that has not completed successfully: init
// containers run in order, so that is the one the pod waits on. "" when all completed or none has started.
func blockingInit(p *corev1.Pod) string {
	for _, s := range p.Status.InitContainerStatuses {
		if t := s.State.Terminated; t != nil && t.ExitCode == 0 {
			continue
		}
		if s.State.Waiting != nil && s.State.Waiting.Reason == "PodInitializing" {
			return "" // not started yet; an earlier one would have been reported
		}
		return s.Name
	}
	return ""
}

// hasAnyLabel: have carries one of the labels anyOf names, with its value.
func hasAnyLabel(have, anyOf map[string]string) bool {
	for k, v := range anyOf {
		if have[k] == v {
			return true
		}
	}
	return false
}
