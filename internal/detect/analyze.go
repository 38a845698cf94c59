package detect

import (
	"fmt"
	"math"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/internal/distro"
)

// Analyze turns a Snapshot into a Result. It is pure: no I/O, no clock, the same Snapshot always
// gives the same Result.
func Analyze(s *Snapshot) Result {
	if s == nil {
		s = &Snapshot{}
	}
	v := newView(s)
	r := Result{
		KubernetesVersion: v.serverVersion,
		KubeletVersions:   v.kubeletVersions(),
		Warnings:          append([]string(nil), s.Warnings...),
	}

	r.Candidates, r.Distribution = chooseDistribution(v)
	for _, e := range r.Distribution.Evidence {
		if e.Signal == "conflict" {
			r.Warnings = append(r.Warnings, "distribution: chose "+r.Distribution.Name+", but "+e.Value+"; if that is wrong, choose the profile with --profile")
		}
	}
	// The chosen distribution's variant the GPU operator does not support: GKE Autopilot.
	if u := distro.Get(r.Distribution.Name).Unsupported; u != nil {
		r.Autopilot = variant(v, u)
		if r.Autopilot.Detected {
			r.Warnings = append(r.Warnings, u.Warning)
		}
	}

	gpus := map[string][]Evidence{}
	for i := range s.Nodes {
		if reasons := gpuReasons(&s.Nodes[i]); len(reasons) > 0 {
			gpus[s.Nodes[i].Name] = reasons
		}
	}
	r.Pools, r.GPUNodes = pools(v, distro.Get(r.Distribution.Name).PoolNotes, gpus)
	r.Nodes = nodeCounts(s.Nodes, gpus)
	r.Scheduling = scheduling(s.Nodes, gpus)
	r.Admission = admission(s)
	r.GPUNodeWorkloads = gpuNodeWorkloads(s.Nodes, gpus, s.PodTemplates, s.PendingGPUPods)
	r.Existing = existing(s)
	r.PrometheusOperator = prometheusOperator(v)
	if len(s.APIGroups) > 0 { // discovery answered: every server serves some group, apps at least
		r.ResourceAPI = &ServedVersions{Versions: append([]string{}, s.ResourceAPIVersions...)}
	}
	r.Warnings = append(r.Warnings, existingWarnings(r.Existing)...)

	// Empty lists print as [] rather than null in `gpuctl detect -o json`.
	if r.Candidates == nil {
		r.Candidates = []Candidate{}
	}
	if r.GPUNodes == nil {
		r.GPUNodes = []GPUNode{}
	}
	if r.Pools == nil {
		r.Pools = []Pool{}
	}
	return r
}

// view is a Snapshot with the lookups detectors share precomputed.
type view struct {
	s             *Snapshot
	groups        map[string]bool
	serverVersion string
}

func newView(s *Snapshot) *view {
	v := &view{s: s, groups: map[string]bool{}}
	for _, g := range s.APIGroups {
		v.groups[g] = true
	}
	if s.ServerVersion != nil {
		v.serverVersion = s.ServerVersion.GitVersion
	}
	return v
}

func (v *view) kubeletVersions() []string {
	seen := map[string]bool{}
	var out []string
	for i := range v.s.Nodes {
		kv := v.s.Nodes[i].Status.NodeInfo.KubeletVersion
		if kv != "" && !seen[kv] {
			seen[kv] = true
			out = append(out, kv)
		}
	}
	sort.Strings(out)
	return out
}

// apiGroup is evidence that the server serves group.
func (v *view) apiGroup(group string, weight int) []Evidence {
	if !v.groups[group] {
		return nil
	}
	return []Evidence{{Signal: "api group", Value: group, Source: "API discovery", Weight: weight}}
}

// onNodes is evidence from the first node for which match returns a value, with how many nodes
// matched.
func (v *view) onNodes(signal string, weight int, match func(n *corev1.Node) (string, bool)) []Evidence {
	var first, value string
	count := 0
	for i := range v.s.Nodes {
		if val, ok := match(&v.s.Nodes[i]); ok {
			if count == 0 {
				first, value = v.s.Nodes[i].Name, val
			}
			count++
		}
	}
	if count == 0 {
		return nil
	}
	return []Evidence{{Signal: signal, Value: value, Source: nodeSource(first, count, len(v.s.Nodes)), Weight: weight}}
}

func nodeSource(name string, count, total int) string {
	switch {
	case total <= 1:
		return "node " + name
	case count == total:
		return fmt.Sprintf("all %d nodes, e.g. %s", total, name)
	default:
		return fmt.Sprintf("%d of %d nodes, e.g. %s", count, total, name)
	}
}

// firstKeyWithPrefix is the first key of m, in sorted order, that starts with prefix, as "key=value".
func firstKeyWithPrefix(m map[string]string, prefix string) (string, bool) {
	k, ok := firstKey(m, prefix, nil)
	if !ok {
		return "", false
	}
	return k + "=" + m[k], true
}

// versionSuffix is evidence that the server's version, or else a kubelet's, matches: managed and
// packaged distributions stamp their builds (replicatedhq/troubleshoot
// pkg/analyze/distribution.go). It also returns the matching version string.
func (v *view) versionSuffix(weight int, match func(string) bool) ([]Evidence, string) {
	if v.serverVersion != "" && match(v.serverVersion) {
		return []Evidence{{Signal: "version suffix", Value: v.serverVersion, Source: "server version", Weight: weight}}, v.serverVersion
	}
	ev := v.onNodes("version suffix", weight, func(n *corev1.Node) (string, bool) {
		kv := n.Status.NodeInfo.KubeletVersion
		return kv, kv != "" && match(kv)
	})
	if len(ev) == 0 {
		return nil, ""
	}
	ev[0].Source = "kubelet, " + ev[0].Source
	return ev, ev[0].Value
}

// confidence combines evidence weights as independent signals: 1 − ∏(1 − wᵢ/100), rounded.
// One strong signal is enough; several weak ones add up without ever passing 100.
func confidence(ev []Evidence) int {
	miss := 1.0
	for _, e := range ev {
		w := math.Max(0, math.Min(100, float64(e.Weight)))
		miss *= 1 - w/100
	}
	return int(math.Round((1 - miss) * 100))
}

// IsControlPlane: the node carries a control-plane role label (node-role.kubernetes.io/control-plane,
// or master on older clusters).
func IsControlPlane(n *corev1.Node) bool {
	_, cp := n.Labels["node-role.kubernetes.io/control-plane"]
	_, master := n.Labels["node-role.kubernetes.io/master"]
	return cp || master
}

func nodeCounts(nodes []corev1.Node, gpus map[string][]Evidence) NodeCounts {
	c := NodeCounts{Total: len(nodes), GPU: len(gpus)}
	for i := range nodes {
		if IsControlPlane(&nodes[i]) {
			c.ControlPlane++
		} else {
			c.Workers++
		}
		if _, ok := firstKeyWithPrefix(nodes[i].Labels, nfdLabelPrefix); ok {
			c.NFDLabelled++
		}
	}
	return c
}

// blockingTaint reports whether a taint keeps pods without a matching toleration off the node.
func blockingTaint(t corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

func scheduling(nodes []corev1.Node, gpus map[string][]Evidence) Scheduling {
	var s Scheduling
	for i := range nodes {
		n := &nodes[i]
		if _, gpu := gpus[n.Name]; !gpu && !n.Spec.Unschedulable && !slices.ContainsFunc(n.Spec.Taints, blockingTaint) {
			s.OpenNodes = append(s.OpenNodes, n.Name)
		}
		if IsControlPlane(n) {
			s.ControlPlaneNodes = append(s.ControlPlaneNodes, n.Name)
			continue
		}
		if n.Spec.Unschedulable {
			continue
		}
		if _, gpu := gpus[n.Name]; gpu {
			s.GPUWorkers = append(s.GPUWorkers, n.Name)
			continue
		}
		open := true
		for _, t := range n.Spec.Taints {
			// Any taint counts, lifecycle ones (not-ready, …) included: erring towards "no open
			// worker" only adds a toleration, erring the other way leaves the operator Pending.
			if blockingTaint(t) {
				open = false
				break
			}
		}
		if open {
			s.OpenWorkers = append(s.OpenWorkers, n.Name)
		}
	}
	s.AllWorkersGPU = len(s.GPUWorkers) > 0 && len(s.OpenWorkers) == 0
	s.AllSchedulableGPU = len(gpus) > 0 && len(s.OpenNodes) == 0
	return s
}

// MonitoringGroup is the Prometheus Operator's API group (prometheus-operator/prometheus-operator
// pkg/apis/monitoring/v1).
const MonitoringGroup = "monitoring.coreos.com"

// prometheusOperator: whether monitoring.coreos.com is served; nil when the snapshot has no API groups
// (discovery was refused: every server serves some group, apps at least).
func prometheusOperator(v *view) *Finding {
	if len(v.s.APIGroups) == 0 {
		return nil
	}
	ev := v.apiGroup(MonitoringGroup, 0)
	if ev == nil {
		ev = []Evidence{}
	}
	return &Finding{Detected: len(ev) > 0, Evidence: ev}
}
