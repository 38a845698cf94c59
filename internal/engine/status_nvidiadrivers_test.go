package engine

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestNVIDIADriversCheck(t *testing.T) {
	driver := func(name string, isDefault bool, state string, sel map[string]any) unstructured.Unstructured {
		spec := map[string]any{"default": isDefault}
		if sel != nil {
			spec["nodeSelector"] = sel
		}
		u := unstructured.Unstructured{Object: map[string]any{"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver",
			"metadata": map[string]any{"name": name}, "spec": spec}}
		if state != "" {
			u.Object["status"] = map[string]any{"state": state}
		}
		return u
	}
	node := func(name, kernel string, labels map[string]string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KernelVersion: kernel}}}
	}
	kernelSel := func(k string) map[string]any {
		return map[string]any{"feature.node.kubernetes.io/kernel-version.full": k}
	}
	kl := func(k string) map[string]string {
		return map[string]string{"feature.node.kubernetes.io/kernel-version.full": k}
	}
	rows := []NodeStatus{{Name: "gpu-1"}, {Name: "gpu-2"}, {Name: "gpu-3"}}
	nodes := []corev1.Node{node("gpu-1", "6.8.0-60-generic", kl("6.8.0-60-generic")), node("gpu-2", "6.8.0-60-generic", kl("6.8.0-60-generic")),
		node("gpu-3", "6.8.0-1017-aws", kl("6.8.0-1017-aws")), node("cpu-1", "6.8.0-1017-aws", kl("6.8.0-1017-aws"))}
	for _, tc := range []struct {
		name    string
		drivers []unstructured.Unstructured
		nodes   []corev1.Node
		want    CheckState
		message []string
	}{
		{"v26.7: a kernel's driver and the default for the rest, both ready", []unstructured.Unstructured{
			driver("default", true, "ready", nil), driver("kernel-6.8.0-60-generic", false, "ready", kernelSel("6.8.0-60-generic"))}, nodes,
			CheckOK, []string{"NVIDIADriver default: ready (gpu-3)", "NVIDIADriver kernel-6.8.0-60-generic: ready (gpu-1, gpu-2)"}},
		{"v26.3: one per kernel, and a node of a kernel that joined later has none", []unstructured.Unstructured{
			driver("kernel-6.8.0-60-generic", false, "ready", kernelSel("6.8.0-60-generic"))}, nodes,
			CheckFailed, []string{"no NVIDIADriver selects gpu-3 (kernel 6.8.0-1017-aws): no driver comes to it"}},
		{"a driver not ready yet is a warning", []unstructured.Unstructured{
			driver("default", true, "notReady", nil), driver("kernel-6.8.0-60-generic", false, "ready", kernelSel("6.8.0-60-generic"))}, nodes,
			CheckWarning, []string{"NVIDIADriver default: notReady (gpu-3)"}},
		{"the controller's owner label wins over the selectors", []unstructured.Unstructured{
			driver("default", true, "ready", nil), driver("kernel-6.8.0-60-generic", false, "ready", kernelSel("6.8.0-60-generic"))},
			[]corev1.Node{node("gpu-1", "6.8.0-60-generic", map[string]string{driverOwnerLabel: "default"}), nodes[1], nodes[2]},
			CheckOK, []string{"NVIDIADriver default: ready (gpu-1, gpu-3)"}},
		{"an NVIDIADriver without a selector (before v26.7) drives every GPU node", []unstructured.Unstructured{driver("default", false, "ready", nil)}, nodes,
			CheckOK, []string{"NVIDIADriver default: ready (gpu-1, gpu-2, gpu-3)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := nvidiaDriversCheck(tc.drivers, tc.nodes, rows, "gpu-operator")
			if c.State != tc.want {
				t.Errorf("state %s, want %s: %s", c.State, tc.want, c.Message)
			}
			for _, m := range tc.message {
				if !strings.Contains(c.Message, m) {
					t.Errorf("message %q lacks %q", c.Message, m)
				}
			}
		})
	}
}

func TestDriversHandedOver(t *testing.T) {
	policy := func(driver map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"driver": driver}}}
	}
	for _, tc := range []struct {
		name   string
		policy *unstructured.Unstructured
		dra    bool
		want   bool
	}{
		{"the ClusterPolicy drives the driver", policy(map[string]any{"enabled": true, "useNvidiaDriverCRD": false}), false, false},
		{"handed to NVIDIADrivers", policy(map[string]any{"enabled": true, "useNvidiaDriverCRD": true}), false, true},
		{"no driver at all (a host driver)", policy(map[string]any{"enabled": false, "useNvidiaDriverCRD": true}), false, false},
		{"the DRA stack", nil, true, true},
		{"no ClusterPolicy", nil, false, false},
	} {
		if got := driversHandedOver(tc.policy, tc.dra); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
