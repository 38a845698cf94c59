package plan

import (
	"fmt"
	"strings"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/distro"
)

// helm plans the Helm path: NFD and the GPU operator as Helm releases in one namespace, after the
// platform's prerequisites and the CRDs; the taint once the operator (and gpuctl's admission policy)
// is in; then the waits for a working stack.
func (b *builder) helm() (*Plan, error) {
	if err := b.refuseOthersOperator(); err != nil {
		return nil, err
	}
	if b.o.Channel != "" {
		b.warn("--channel " + b.o.Channel + ": not used, OLM channels apply on OpenShift only and this is " + b.p.Distribution + " (installed with Helm)")
	}
	// NFD is someone else's unless gpuctl's release runs it; the subchart of a release --adopt takes
	// over is kept running as it is (KeptSubchart), and used as any NFD gpuctl did not install.
	nfdForeign := b.det.Existing.NFD.Present && !b.ours(b.det.Existing.NFD.Helm, NFDRelease)
	decision := DecideTaint(b.det, TaintOptions{Force: b.o.Taint, NoTaint: b.o.NoTaint, PolicyAvailable: true, Own: []string{b.o.Namespace}})
	rel, err := b.helmReleases(decision)
	if err != nil {
		return nil, err
	}
	b.warnRuntimeClass()

	b.add(namespaceStep(b.o.Namespace), b.prerequisitesStep())
	if err := b.addLicensing(rel.operator.Values, b.o.Namespace); err != nil {
		return nil, err
	}
	b.addPSP()
	b.add(b.crdsStep(nfdForeign), b.nfdReleaseStep(rel.nfd, nfdForeign), waitNFDStep())
	b.add(gkeDriverInstallers(b.det, b.in.Charts[GKEDriverInstaller], b.o.Namespace, at(rel.operator.Values, "driver", "enabled"))...)
	b.add(b.safetyStep(decision, nfdForeign))
	// The taint follows the operator release, which carries gpuctl's MutatingAdmissionPolicy: pods that
	// request GPUs tolerate the taint from the moment it is there.
	opStep := operatorReleaseStep(rel.operator)
	if b.o.DRA {
		opStep.Why = "the operator reconciles GPUCluster " + GPUClusterName + " (--dra) into NVIDIA's DRA driver, its validator and DCGM Exporter, and an NVIDIADriver into the driver"
	}
	b.add(opStep)
	// The nodes name their device-plugin config once the release's ConfigMap has it: the plugin re-reads
	// its config when the label changes, not when the ConfigMap does, so a label naming a key the
	// ConfigMap does not have yet would leave the node on the default until the plugin restarts.
	if rel.sharing != nil {
		b.add(*rel.sharing)
	}
	// Likewise MIG manager reads the node's config label once the release enabled it.
	if rel.mig != nil {
		b.add(*rel.mig)
	}
	if rel.monitoring != nil {
		b.add(monitoringReleaseStep(rel.monitoring))
	}
	b.add(waitTolerationStep(decision), b.helmTaintStep(decision))
	b.addWaits(ClusterPolicyName)
	return b.p, nil
}

// warnRuntimeClass: where the distribution registers RuntimeClass nvidia itself (RKE2, k3s), GPU pods
// must name the NVIDIA runtime themselves; the operator's toolkit adds the same handler to its
// containerd (distro.Distribution.RuntimeClass).
func (b *builder) warnRuntimeClass() {
	if name := b.p.Distribution; distro.Get(name).RuntimeClass {
		b.warn("on " + name + ", GPU pods must ask for the NVIDIA runtime: runtimeClassName: nvidia (the RuntimeClass " + name + " and the operator both provide), or the device plugin's CDI injection")
	}
}

// namespaceStep creates the install namespace with the Pod Security level the operands need.
func namespaceStep(ns string) Step {
	return Step{ID: "namespace", Kind: KindObjects, Title: "Namespace " + ns,
		Why:     "the operands are privileged DaemonSets: Pod Security Admission must allow them in this namespace",
		Objects: []map[string]any{namespaceObject(ns)}}
}

// prerequisitesStep applies the profile's platform objects (GKE's ResourceQuota, …), in the install
// namespace unless they name one; skipped when the profile has none.
func (b *builder) prerequisitesStep() Step {
	prereq := Step{ID: "prerequisites", Kind: KindObjects, Title: "Platform prerequisites", Why: "objects the " + b.prof.Name + " profile needs before anything runs"}
	for _, obj := range b.prof.Objects() {
		obj = clone(obj)
		if md, ok := obj["metadata"].(map[string]any); ok {
			if _, has := md["namespace"]; !has && obj["kind"] != "Namespace" {
				md["namespace"] = b.o.Namespace
			}
		}
		prereq.Objects = append(prereq.Objects, obj)
	}
	if len(prereq.Objects) == 0 {
		prereq.Skip = "the " + b.prof.Name + " profile needs none"
	}
	return prereq
}

// addPSP binds the privileged PodSecurityPolicy on TKGS, whose older clusters still enforce PSP
// (distro.Distribution.PrivilegedPSP).
func (b *builder) addPSP() {
	if !distro.Get(b.p.Distribution).PrivilegedPSP {
		return
	}
	// Older TKGS clusters (Kubernetes < 1.25) enforce PodSecurityPolicy; VMware's practice binds
	// psp:vmware-system-privileged to the namespace's service accounts
	// (https://raw.githubusercontent.com/wavefrontHQ/wavefront-collector-for-kubernetes/master/deploy/vsphere-tanzu/0-vsphere-tanzu-rolebinding.yaml).
	// Whether PSP is served is known only at run time.
	b.add(Step{ID: "psp", Kind: KindPSP, Title: "PodSecurityPolicy RoleBinding (older TKGS)", Target: b.o.Namespace,
		Why: "operands are privileged; on clusters that still enforce PodSecurityPolicy they need the privileged policy"})
}

// crdsStep applies the CRDs of the operator release chosen, and NFD's unless another install owns NFD.
func (b *builder) crdsStep(nfdForeign bool) Step {
	opVersion := b.in.Charts[OperatorRelease].AppVersion
	crds := Step{ID: "crds", Kind: KindCRDs, Title: "CRDs (server-side apply)",
		Why: "Helm installs a chart's CRDs once and never upgrades them; stale CRDs reject new ClusterPolicy fields"}
	if !nfdForeign {
		crds.Charts = append(crds.Charts, NFDRelease)
	}
	crds.Charts = append(crds.Charts, OperatorRelease)
	crds.ChartReleases = map[string]string{OperatorRelease: opVersion}
	crds.Title += ", GPU Operator " + opVersion
	return crds
}

// nfdReleaseStep installs NFD, or is skipped where NFD already runs from another install.
func (b *builder) nfdReleaseStep(nfd *Release, nfdForeign bool) Step {
	step := Step{ID: "release-" + NFDRelease, Kind: KindRelease, Title: "Install Node Feature Discovery " + b.in.Charts[NFDRelease].AppVersion,
		Why: "the GPU operator finds GPU nodes by NFD's PCI vendor 10de label", Release: nfd}
	if nfdForeign {
		step.Skip = "NFD already runs (" + describeNFD(b.det.Existing.NFD) + ")"
		step.Release = nil
	}
	return step
}

// safetyStep checks at run time what the taint would strand, with the tolerations to add to the
// operator and NFD master/gc if every schedulable worker turns out to be a GPU node; skipped when
// nothing is tainted.
func (b *builder) safetyStep(decision TaintDecision, nfdForeign bool) Step {
	safety := &Safety{
		TolerationsPlanned: needsTolerations(b.det, decision),
		OperatorValues:     normalized(operatorTolerations()),
		NFDValues:          normalized(nfdTolerations()),
		OperatorRelease:    "release-" + OperatorRelease,
	}
	if !nfdForeign {
		safety.NFDRelease = "release-" + NFDRelease
	}
	step := Step{ID: "safety", Kind: KindSafety, Title: "Check what the taint would strand",
		Why:    "the operator Deployment and NFD master/gc do not tolerate nvidia.com/gpu, so the taint must leave them a node to run on; every GPU DaemonSet tolerates it",
		Safety: safety}
	if !decision.Taint {
		step.Skip = "GPU nodes are not tainted: " + decision.Skip
		if b.o.NoTaint {
			step.Skip = "--no-taint: GPU nodes are not tainted"
		}
	}
	return step
}

// operatorReleaseStep installs the GPU operator.
func operatorReleaseStep(op *Release) Step {
	return Step{ID: "release-" + OperatorRelease, Kind: KindRelease, Title: "Install NVIDIA GPU Operator " + op.AppVersion,
		Why: "the operator reconciles the ClusterPolicy into driver, toolkit, device plugin and validator DaemonSets", Release: op}
}

// monitoringReleaseStep installs gpuctl's dashboard and alerts (--monitoring).
func monitoringReleaseStep(rel *Release) Step {
	return Step{ID: "release-" + MonitoringRelease, Kind: KindRelease, Title: "Install the GPU dashboard and alerts",
		Why:     "--monitoring: a Grafana dashboard ConfigMap for the Grafana sidecar and a PrometheusRule; the operator creates the ServiceMonitors",
		Release: rel}
}

// waitTolerationStep waits until gpuctl's MutatingAdmissionPolicy is in force; skipped unless the
// plan both taints and installs the policy.
func waitTolerationStep(decision TaintDecision) Step {
	step := Step{ID: "wait-toleration", Kind: KindWaitToleration, Title: "Wait until the API server adds the GPU toleration",
		Why: "gpuctl's MutatingAdmissionPolicy must be in force before the taint, or a GPU pod created in between would not tolerate it"}
	if !decision.Policy || !decision.Taint {
		step.Skip = "gpuctl installs no MutatingAdmissionPolicy"
		if decision.Toleration == TolerationPlugin {
			step.Skip = "the API server adds the toleration itself (ExtendedResourceToleration)"
		}
	}
	return step
}

// helmTaintStep is the taint step, skipped with the decision's reason when the nodes are not tainted.
func (b *builder) helmTaintStep(decision TaintDecision) Step {
	step := b.taintStep(decision)
	if !decision.Taint {
		step.Skip, step.Why = decision.Skip, ""
	}
	return step
}

// namespaceObject is the install namespace, privileged for Pod Security Admission.
func namespaceObject(name string) map[string]any {
	labels := map[string]any{}
	// Pod Security Admission levels: the operands need hostPath, privileged and host PID (psa.enabled in
	// NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0).
	for _, mode := range []string{"enforce", "audit", "warn"} {
		labels["pod-security.kubernetes.io/"+mode] = "privileged"
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name, "labels": labels},
	}
}

// gkeDriverInstallers: on GKE (distro.Distribution.DriverInstaller), where GKE installs no driver (no
// cloud.google.com/gke-gpu-driver-version label) and the operator's driver container is off (NVIDIA's
// driver container does not support COS), Google's installer DaemonSet puts the driver on the host —
// one release per node OS variant
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html, "Google driver installer"
// mode).
func gkeDriverInstallers(det *detect.Result, chart ChartInfo, ns string, driverEnabled any) []Step {
	if !distro.Get(det.Distribution.Name).DriverInstaller || driverEnabled != false || chart.Name == "" {
		return nil
	}
	variants := map[string][]string{}
	for _, n := range det.GPUNodes {
		if n.HostDriver != "" {
			continue
		}
		v := "cos"
		if strings.Contains(strings.ToLower(n.OSImage), "ubuntu") {
			v = "ubuntu"
		}
		variants[v] = append(variants[v], n.Name)
	}
	var steps []Step
	for _, v := range []string{"cos", "ubuntu"} {
		nodes := variants[v]
		if len(nodes) == 0 {
			continue
		}
		name := GKEDriverInstaller + "-" + v
		values := map[string]any{"variant": v}
		steps = append(steps, Step{ID: "release-" + name, Kind: KindRelease,
			Title: "Install Google's NVIDIA driver installer (" + v + ")",
			Why:   fmt.Sprintf("GKE installs no driver on %s, and the GPU operator's driver container does not support GKE's images", strings.Join(nodes, ", ")),
			Release: &Release{Name: name, Namespace: ns, Chart: chart.Name, ChartVersion: chart.Version, Values: values,
				Layers: []Layer{{Source: "detected: GPU nodes on " + v + " without a GKE-installed driver", Values: values}}}})
	}
	return steps
}
