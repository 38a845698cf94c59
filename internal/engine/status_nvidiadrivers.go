package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
)

// driverOwnerLabel is the label NVIDIA's controller routes each GPU node to one NVIDIADriver by, from
// v26.7 (internal/consts/consts.go NVIDIADriverOwnerLabel at v26.7.0); older releases have none.
const driverOwnerLabel = "nvidia.com/gpu-operator.driver.owner"

// readNVIDIADrivers lists the NVIDIADrivers; none, or their CRD not served, is an empty list.
func (s *Status) readNVIDIADrivers(ctx context.Context) ([]unstructured.Unstructured, error) {
	list, err := s.Clients.Dynamic.Resource(health.NVIDIADriverResource()).List(ctx, metav1.ListOptions{})
	switch {
	case err == nil:
		return list.Items, nil
	case kube.Absent(err):
		return nil, nil
	}
	return nil, fmt.Errorf("list NVIDIADrivers: %w", err)
}

// driversHandedOver reports whether NVIDIADrivers drive the GPU nodes: the ClusterPolicy hands the
// driver to them (spec.driver.useNvidiaDriverCRD), as --precompiled auto and the DRA stack do.
func driversHandedOver(policy *unstructured.Unstructured, dra bool) bool {
	if dra {
		return true
	}
	if policy == nil {
		return false
	}
	on, _, _ := unstructured.NestedBool(policy.Object, "spec", "driver", "useNvidiaDriverCRD")
	enabled, found, _ := unstructured.NestedBool(policy.Object, "spec", "driver", "enabled")
	return on && (enabled || !found)
}

// nvidiaDriversCheck judges the NVIDIADrivers that drive the GPU nodes: a GPU node none of them
// selects gets no driver at all (a kernel that joined after --precompiled auto planned, on a release
// without a default NVIDIADriver), which fails; an NVIDIADriver that is not ready is a warning (its
// driver pods are being built or pulled, or cannot be).
func nvidiaDriversCheck(drivers []unstructured.Unstructured, nodes []corev1.Node, rows []NodeStatus, ns string) StatusCheck {
	c := StatusCheck{Name: "nvidia-drivers", State: CheckOK}
	gpu := map[string]bool{}
	for _, r := range rows {
		gpu[r.Name] = true
	}
	served := map[string][]string{}
	var orphans []string
	for i := range nodes {
		n := &nodes[i]
		if !gpu[n.Name] {
			continue
		}
		if d := selectingDriver(drivers, n); d != "" {
			served[d] = append(served[d], n.Name)
			continue
		}
		orphans = append(orphans, fmt.Sprintf("%s (kernel %s)", n.Name, n.Status.NodeInfo.KernelVersion))
	}
	var lines, notReady []string
	for i := range drivers {
		name := drivers[i].GetName()
		state, _, _ := unstructured.NestedString(drivers[i].Object, "status", "state")
		if state == "" {
			state = "no state yet"
		}
		nodesOf := "no GPU node"
		if ns := served[name]; len(ns) > 0 {
			slices.Sort(ns)
			nodesOf = strings.Join(ns, ", ")
		}
		lines = append(lines, fmt.Sprintf("NVIDIADriver %s: %s (%s)", name, state, nodesOf))
		if state != "ready" && len(served[name]) > 0 {
			notReady = append(notReady, name)
		}
	}
	c.Message = strings.Join(lines, "; ")
	switch {
	case len(orphans) > 0:
		slices.Sort(orphans)
		c.State = CheckFailed
		c.Message = "no NVIDIADriver selects " + strings.Join(orphans, ", ") + ": no driver comes to it; " + c.Message
		c.Hint = "gpuctl upgrade plans an NVIDIADriver for its kernel (--precompiled auto, docs/drivers.md), or give it an NVIDIADriver of your own"
	case len(notReady) > 0:
		c.State = CheckWarning
		c.Hint = "kubectl get nvidiadriver " + notReady[0] + " -o yaml shows the operator's conditions; kubectl get pods -n " + ns + " -l app=" + driverApp + " its driver pods (docs/troubleshooting.md#drivers)"
	}
	return c
}

// selectingDriver is the NVIDIADriver that drives node: the one NVIDIA's controller routed it to (v26.7's
// owner label), else the first whose nodeSelector picks it, else a default one; "" when none does.
func selectingDriver(drivers []unstructured.Unstructured, n *corev1.Node) string {
	if owner := n.Labels[driverOwnerLabel]; owner != "" {
		for i := range drivers {
			if drivers[i].GetName() == owner {
				return owner
			}
		}
	}
	fallback := ""
	for i := range drivers {
		d := &drivers[i]
		if isDefault, _, _ := unstructured.NestedBool(d.Object, "spec", "default"); isDefault {
			fallback = d.GetName()
			continue
		}
		sel, _, _ := unstructured.NestedStringMap(d.Object, "spec", "nodeSelector")
		if labels.SelectorFromSet(sel).Matches(labels.Set(n.Labels)) {
			return d.GetName()
		}
	}
	return fallback
}
