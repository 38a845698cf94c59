package detect

import (
	"fmt"
	"sort"
	"strings"
)

// existing works out what is already installed from the Snapshot's workloads, Helm releases,
// Subscriptions, ClusterPolicies and node labels.
func existing(s *Snapshot) Existing {
	var e Existing
	e.Secrets = s.Secrets
	nfdNamespaces := map[string]bool{}
	for _, w := range s.Workloads {
		e.addWorkload(w, s, nfdNamespaces)
	}
	// A gpu-operator release with no Deployment (a failed or pending install) still blocks a new
	// install under the same name, so look for it by chart name too.
	if e.GPUOperator.Helm == nil {
		e.GPUOperator.Helm = releaseByChart(s, "gpu-operator")
	}
	if e.NFD.Helm == nil {
		e.NFD.Helm = releaseByChart(s, "node-feature-discovery")
	}
	e.addSubscriptions(s)
	op := &e.GPUOperator
	op.Present = op.Deployment != nil || op.Helm != nil || op.OLM != nil
	switch {
	case op.Deployment != nil:
		op.Namespace = op.Deployment.Namespace
	case op.Helm != nil:
		op.Namespace = op.Helm.Namespace
	case op.OLM != nil:
		op.Namespace = op.OLM.Namespace
	}
	e.NFD.Present = len(e.NFD.Workloads) > 0 || e.NFD.OLM != nil || e.NFD.Helm != nil
	for ns := range nfdNamespaces {
		e.NFD.Namespaces = append(e.NFD.Namespaces, ns)
	}
	sort.Strings(e.NFD.Namespaces)
	e.addNodes(s)
	e.addClusterPolicies(s)
	e.GPUClusters = append(e.GPUClusters, s.GPUClusters...)
	return e
}

// addWorkload files a workload under the component it is: NFD (noting its namespace), the operator,
// an operand, a device plugin (the operator's, a standalone one, GKE's), GKE's driver installer, DCGM
// Exporter.
func (e *Existing) addWorkload(w Workload, s *Snapshot, nfdNamespaces map[string]bool) {
	c := component(w, s)
	switch Classify(w) {
	case ComponentNFDMaster, ComponentNFDWorker, ComponentNFDGC, ComponentNFDTopology:
		e.NFD.Workloads = append(e.NFD.Workloads, c)
		nfdNamespaces[w.Namespace] = true
		if e.NFD.Helm == nil {
			e.NFD.Helm = releaseOf(w, s)
		}
	case ComponentGPUOperator:
		if e.GPUOperator.Deployment == nil {
			e.GPUOperator.Deployment = &c
			e.GPUOperator.Helm = releaseOf(w, s)
		}
	case ComponentOperand:
		if w.hasImage(func(repo string) bool { return strings.HasSuffix(repo, "/k8s-device-plugin") }) &&
			!w.mentions("gpu-feature-discovery") && !w.mentions("mps-control-daemon") {
			e.DevicePlugins = append(e.DevicePlugins, DevicePlugin{Component: c, Provider: "gpu-operator", Nodes: targets(w, s.Nodes)})
		} else {
			e.Operands = append(e.Operands, c)
		}
	case ComponentDevicePlugin:
		e.DevicePlugins = append(e.DevicePlugins, DevicePlugin{Component: c, Provider: "standalone", Nodes: targets(w, s.Nodes)})
	case ComponentGKEDevicePlugin:
		if c.ManagedBy == "" {
			c.ManagedBy = "GKE"
		}
		e.DevicePlugins = append(e.DevicePlugins, DevicePlugin{Component: c, Provider: "gke", Nodes: targets(w, s.Nodes)})
	case ComponentGKEDriver:
		e.GKEDriverInstaller = &c
	case ComponentDCGMExporter:
		e.DCGMExporters = append(e.DCGMExporters, c)
	}
}

// addSubscriptions files the OLM Subscriptions of the operator and of NFD, each marked gpuctl's when
// the release that applied it carries gpuctl's label.
func (e *Existing) addSubscriptions(s *Snapshot) {
	for i := range s.Subscriptions {
		sub := s.Subscriptions[i]
		if r := releaseOf(Workload{Namespace: sub.Namespace, HelmRelease: sub.HelmRelease, HelmNamespace: sub.HelmNamespace}, s); r != nil {
			sub.Gpuctl = r.Gpuctl
		}
		switch sub.Package {
		case "gpu-operator-certified", "gpu-operator":
			e.GPUOperator.OLM = &sub
		case "nfd", "node-feature-discovery", "node-feature-discovery-operator":
			e.NFD.OLM = &sub
		}
	}
}

// addNodes counts the nodes NFD labelled, and names those whose driver is preinstalled on the host.
func (e *Existing) addNodes(s *Snapshot) {
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if _, ok := firstKeyWithPrefix(n.Labels, nfdLabelPrefix); ok {
			e.NFD.LabelledNodes++
		}
		if n.Labels["nvidia.com/gpu.deploy.driver"] == "pre-installed" {
			e.HostDriverNodes = append(e.HostDriverNodes, n.Name)
		}
	}
	sort.Strings(e.HostDriverNodes)
}

// addClusterPolicies lists the ClusterPolicies oldest first and names the one the operator honours:
// only the oldest, by creationTimestamp then name
// (NVIDIA/gpu-operator controllers/clusterpolicy_controller.go@v26.7.0).
func (e *Existing) addClusterPolicies(s *Snapshot) {
	e.ClusterPolicies = append(e.ClusterPolicies, s.ClusterPolicies...)
	sort.SliceStable(e.ClusterPolicies, func(i, j int) bool {
		a, b := e.ClusterPolicies[i], e.ClusterPolicies[j]
		if !a.Created.Equal(b.Created) {
			return a.Created.Before(b.Created)
		}
		return a.Name < b.Name
	})
	if len(e.ClusterPolicies) > 0 {
		e.ActiveClusterPolicy = e.ClusterPolicies[0].Name
	}
}

func component(w Workload, s *Snapshot) Component {
	c := Component{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, Images: w.Images, Desired: w.Desired, Ready: w.Ready}
	switch {
	case w.Owner != "":
		c.ManagedBy = w.Owner
	case w.HelmRelease != "":
		c.ManagedBy = "helm release " + helmNamespace(w) + "/" + w.HelmRelease
	case w.Labels["olm.owner"] != "":
		// OLM labels what a ClusterServiceVersion deploys with olm.owner=<csv>.
		c.ManagedBy = "OLM (" + w.Labels["olm.owner"] + ")"
	}
	return c
}

func helmNamespace(w Workload) string {
	if w.HelmNamespace != "" {
		return w.HelmNamespace
	}
	return w.Namespace
}

// releaseOf is the Helm release named by a workload's meta.helm.sh annotations, if Helm's storage
// holds it; if storage was unreadable, a release with just the name is returned.
func releaseOf(w Workload, s *Snapshot) *HelmRelease {
	if w.HelmRelease == "" {
		return nil
	}
	ns := helmNamespace(w)
	for i := range s.HelmReleases {
		if r := s.HelmReleases[i]; r.Name == w.HelmRelease && r.Namespace == ns {
			return &r
		}
	}
	return &HelmRelease{Name: w.HelmRelease, Namespace: ns}
}

// releaseByChart prefers a deployed release of the chart, else any.
func releaseByChart(s *Snapshot, chart string) *HelmRelease {
	var found *HelmRelease
	for i := range s.HelmReleases {
		r := s.HelmReleases[i]
		if r.Chart != chart {
			continue
		}
		if found == nil || (found.Status != "deployed" && r.Status == "deployed") {
			found = &r
		}
	}
	return found
}

// existingWarnings are the conflicts and half-states a person should know about before installing.
func existingWarnings(e Existing) []string {
	var out []string
	if n := len(e.ClusterPolicies); n > 1 {
		out = append(out, fmt.Sprintf("%d ClusterPolicies exist: the operator honours only the oldest, %s, and marks the others ignored (NVIDIA/gpu-operator controllers/clusterpolicy_controller.go@v26.7.0)", n, e.ActiveClusterPolicy))
	}
	for _, cp := range e.ClusterPolicies {
		if cp.Name == e.ActiveClusterPolicy && cp.State == "ready" && (cp.ReadyReason == "NoGPUNodes" || cp.ReadyReason == "NFDLabelsMissing") {
			out = append(out, fmt.Sprintf("ClusterPolicy %s is ready with reason %s: no GPU is validated (NVIDIA/gpu-operator controllers/clusterpolicy_controller.go@v26.7.0)", cp.Name, cp.ReadyReason))
		}
	}
	if len(e.GPUClusters) > 0 {
		out = append(out, fmt.Sprintf("GPUCluster %s exists (DRA): the chart refuses to create a ClusterPolicy next to it (NVIDIA/gpu-operator deployments/gpu-operator@v26.7.0)", strings.Join(e.GPUClusters, ", ")))
	}
	if r := e.GPUOperator.Helm; r != nil && r.Status != "" && r.Status != "deployed" {
		out = append(out, fmt.Sprintf("Helm release %s/%s is %s (revision %d): upgrade or uninstall it before installing again", r.Namespace, r.Name, r.Status, r.Revision))
	}
	if len(e.NFD.Namespaces) > 1 {
		out = append(out, fmt.Sprintf("NFD runs in %d namespaces (%s): only one NFD should run per cluster (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html; NVIDIA/gpu-operator#87, #1038)", len(e.NFD.Namespaces), strings.Join(e.NFD.Namespaces, ", ")))
	}
	if r := e.NFD.Helm; r != nil && r.Chart == "gpu-operator" {
		out = append(out, fmt.Sprintf("NFD is the subchart of Helm release %s/%s: upgrading that release with nfd.enabled=false removes it", r.Namespace, r.Name))
	}
	// Two device plugins on one node fight over the same GPUs: each registers nvidia.com/gpu with the kubelet.
	plugins := map[string][]string{}
	for _, dp := range e.DevicePlugins {
		for _, n := range dp.Nodes {
			plugins[n] = append(plugins[n], dp.Namespace+"/"+dp.Name)
		}
	}
	var crowded []string
	for n, dps := range plugins {
		if len(dps) > 1 {
			crowded = append(crowded, fmt.Sprintf("%s (%s)", n, strings.Join(dps, ", ")))
		}
	}
	sort.Strings(crowded)
	if len(crowded) > 0 {
		out = append(out, "more than one NVIDIA device plugin targets "+strings.Join(crowded, "; ")+": a duplicate device plugin conflicts")
	}
	return out
}
