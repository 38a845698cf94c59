package detect

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/internal/distro"
)

// evidence is what the snapshot shows of signals, in their order, and the version the first
// distro.Signal.GivesVersion signal seen gives ("" without one).
func (v *view) evidence(signals []distro.Signal) (ev []Evidence, version string) {
	versioned := false
	for _, s := range signals {
		found, ver := v.signal(s, ev)
		if len(found) > 0 && s.GivesVersion && !versioned {
			version, versioned = ver, true
		}
		ev = append(ev, found...)
	}
	return ev, version
}

// signal is the evidence of one signal, and the version its value gives. before is the evidence
// the distribution's earlier signals found (distro.ManagedControlPlane counts only after some).
func (v *view) signal(s distro.Signal, before []Evidence) ([]Evidence, string) {
	switch s.In {
	case distro.Label, distro.Annotation:
		ev := v.onNodes(string(s.In), s.Weight, func(n *corev1.Node) (string, bool) { return keyed(s, n) })
		if len(ev) == 0 {
			return nil, ""
		}
		_, value, _ := strings.Cut(ev[0].Value, "=")
		return ev, value
	case distro.NodeName, distro.Kernel, distro.OSImage, distro.Runtime, distro.ProviderID:
		return v.onNodes(string(s.In), s.Weight, func(n *corev1.Node) (string, bool) {
			val := nodeField(s.In, n)
			return val, s.Match.Matches(val)
		}), ""
	case distro.Version:
		return v.versionSuffix(s.Weight, s.Match.Matches)
	case distro.APIGroup:
		return v.apiGroup(s.Name, s.Weight), ""
	case distro.ClusterVersion:
		return v.clusterVersion(s.Weight)
	case distro.ConfigMap:
		if s.Name == kubeadmConfigMap && v.s.KubeadmConfig {
			ns, _, _ := strings.Cut(s.Name, "/")
			return []Evidence{{Signal: string(s.In), Value: s.Name, Source: ns, Weight: s.Weight}}, ""
		}
	case distro.Workload:
		return v.workload(s), ""
	case distro.ManagedControlPlane:
		return managedControlPlane(v, before, s.Weight), ""
	case distro.Warning:
		for _, w := range v.s.Warnings {
			if s.Match.Matches(w) {
				return []Evidence{{Signal: string(s.In), Value: w, Source: "API server", Weight: s.Weight}}, ""
			}
		}
	}
	return nil, ""
}

// keyed is the label (key=value) or annotation (key only: values such as node-args can be long and
// hold secrets) of n that signal s names, and whether n has one.
func keyed(s distro.Signal, n *corev1.Node) (string, bool) {
	m := n.Labels
	if s.In == distro.Annotation {
		m = n.Annotations
	}
	key, ok := "", false
	for _, k := range s.Keys {
		if val, has := m[k]; has && (s.Value == "" || val == s.Value) && (!s.EmptyValue || val == "") {
			key, ok = k, true
			break
		}
	}
	for _, p := range s.Prefixes {
		if ok {
			break
		}
		key, ok = firstKey(m, p, s.Except)
	}
	switch {
	case !ok:
		return "", false
	case s.In == distro.Annotation:
		return key, true
	}
	return key + "=" + m[key], true
}

// firstKey is the first key of m, in sorted order, that starts with prefix and is not one of except.
func firstKey(m map[string]string, prefix string, except []string) (string, bool) {
	var keys []string
	for k := range m {
		if strings.HasPrefix(k, prefix) && !slices.Contains(except, k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "", false
	}
	sort.Strings(keys)
	return keys[0], true
}

// nodeField is the part of n a text signal looks at.
func nodeField(in distro.Where, n *corev1.Node) string {
	switch in {
	case distro.NodeName:
		return n.Name
	case distro.Kernel:
		return n.Status.NodeInfo.KernelVersion
	case distro.OSImage:
		return n.Status.NodeInfo.OSImage
	case distro.Runtime:
		return n.Status.NodeInfo.ContainerRuntimeVersion
	case distro.ProviderID:
		return n.Spec.ProviderID
	}
	return ""
}

// clusterVersion is evidence of OpenShift's ClusterVersion: the first completed version, else the
// desired one.
func (v *view) clusterVersion(weight int) ([]Evidence, string) {
	cv := v.s.ClusterVersion
	if cv == nil {
		return nil, ""
	}
	version := cv.Desired
	if len(cv.Completed) > 0 {
		version = cv.Completed[0]
	}
	if version == "" {
		return nil, ""
	}
	return []Evidence{{Signal: string(distro.ClusterVersion), Value: version, Source: "ClusterVersion version", Weight: weight}}, version
}

// workload is evidence of the workload s names, among those Gather kept (ComponentPlatform).
func (v *view) workload(s distro.Signal) []Evidence {
	for _, w := range v.s.Workloads {
		if w.Namespace+"/"+w.Name == s.Name && Classify(w) == ComponentPlatform {
			return []Evidence{{Signal: string(s.In), Value: w.Kind + " " + s.Name, Source: w.Kind + "s", Weight: s.Weight}}
		}
	}
	return nil
}

// platformWorkload reports whether w is a workload a distribution's signals name.
func platformWorkload(w Workload) bool {
	for _, d := range distro.All() {
		for _, s := range d.Signals {
			if s.In == distro.Workload && s.Name == w.Namespace+"/"+w.Name {
				return true
			}
		}
	}
	return false
}

// managedControlPlane adds a weak hint for cloud-managed Kubernetes: no control-plane node is
// listed (replicatedhq/troubleshoot pkg/analyze/distribution.go). It only counts when the cloud's own signals
// were already seen, since it says nothing about which cloud.
func managedControlPlane(v *view, ev []Evidence, weight int) []Evidence {
	if len(ev) == 0 || len(v.s.Nodes) == 0 {
		return nil
	}
	for i := range v.s.Nodes {
		if IsControlPlane(&v.s.Nodes[i]) {
			return nil
		}
	}
	return []Evidence{{Signal: string(distro.ManagedControlPlane), Value: "not among the nodes, as with a managed control plane", Source: "node list", Weight: weight}}
}

// variant looks for a variant of the chosen distribution (GKE Autopilot): detected at MinConfidence.
func variant(v *view, u *distro.Variant) *Finding {
	ev, _ := v.evidence(u.Signals)
	return &Finding{Detected: confidence(ev) >= MinConfidence, Evidence: ev}
}
