package detect

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// targets lists the nodes a DaemonSet would place a pod on, judged from the Snapshot alone (we do
// not list pods): its node selector, its required node affinity, and its tolerations against each
// node's NoSchedule/NoExecute taints. The DaemonSet controller adds tolerations for the
// node.kubernetes.io/* lifecycle taints itself, so those are ignored.
func targets(w Workload, nodes []corev1.Node) []string {
	var out []string
	for i := range nodes {
		n := &nodes[i]
		if !matchesSelector(w.NodeSelector, n.Labels) {
			continue
		}
		if w.Affinity != nil && !matchesNodeSelector(w.Affinity, n) {
			continue
		}
		if !toleratesNode(w.Tolerations, n) {
			continue
		}
		out = append(out, n.Name)
	}
	return out
}

func matchesSelector(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// matchesNodeSelector: terms are ORed, the requirements inside a term ANDed; an empty term list
// matches nothing (k8s.io/api core/v1 NodeSelector docs).
func matchesNodeSelector(sel *corev1.NodeSelector, n *corev1.Node) bool {
	for _, term := range sel.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue
		}
		ok := true
		for _, r := range term.MatchExpressions {
			val, has := n.Labels[r.Key]
			if !matchesRequirement(r, val, has) {
				ok = false
				break
			}
		}
		for _, r := range term.MatchFields {
			if r.Key != "metadata.name" || !matchesRequirement(r, n.Name, true) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func matchesRequirement(r corev1.NodeSelectorRequirement, val string, has bool) bool {
	in := func() bool {
		for _, v := range r.Values {
			if v == val {
				return true
			}
		}
		return false
	}
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return has && in()
	case corev1.NodeSelectorOpNotIn:
		return !has || !in()
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !has || len(r.Values) != 1 {
			return false
		}
		a, err1 := strconv.ParseInt(val, 10, 64)
		b, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return a > b
		}
		return a < b
	}
	return false
}

func toleratesNode(tols []corev1.Toleration, n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if !blockingTaint(t) || strings.HasPrefix(t.Key, "node.kubernetes.io/") {
			continue
		}
		tolerated := false
		for _, tol := range tols {
			if tolerates(tol, t) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return false
		}
	}
	return true
}

// tolerates follows the core/v1 Toleration rules: an empty effect matches every effect; Exists
// with an empty key matches every taint; Equal (the default) needs key and value to match.
func tolerates(tol corev1.Toleration, t corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Operator == corev1.TolerationOpExists {
		return tol.Key == "" || tol.Key == t.Key
	}
	return tol.Key == t.Key && tol.Value == t.Value
}
