package uninstall

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/kube/kubetest"
	"github.com/gpuctl/gpuctl/internal/record"
)

func TestStackWritten(t *testing.T) {
	for _, tc := range []struct {
		name     string
		key      string
		managers []string
		want     bool
	}{
		{"NFD's feature label, written by nfd-master", "feature.node.kubernetes.io/pci-10de.present", []string{"nfd-master"}, true},
		{"the operator's label, written by gpu-operator", "nvidia.com/gpu.present", []string{"gpu-operator"}, true},
		{"a label gpuctl patched", "nvidia.com/gpu.deploy.driver", []string{"gpuctl"}, true},
		{"an admin's kubectl label", "nvidia.com/mig.config", []string{"kubectl-label"}, false},
		{"an admin's kubectl edit", "nvidia.com/device-plugin.config", []string{"kubectl-edit"}, false},
		{"the MIG manager's state, which it sets with kubectl label", "nvidia.com/mig.config.state", []string{"kubectl-label"}, true},
		{"the MIG manager pausing an operand with kubectl label", "nvidia.com/gpu.deploy.device-plugin", []string{"gpu-operator", "kubectl-label"}, true},
		{"a key the operator and an admin both wrote", "nvidia.com/gpu.deploy.driver", []string{"gpu-operator", "admin-tool"}, false},
		{"a key whose writer was not recorded", "nvidia.com/gpu.present", nil, false},
		{"a node's creator (the kubelet or whoever registered it)", "nvidia.com/gpu.present", []string{"kubelet"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stackWritten(tc.key, tc.managers); got != tc.want {
				t.Errorf("stackWritten(%q, %v) = %v, want %v", tc.key, tc.managers, got, tc.want)
			}
		})
	}
}

func TestPlanNodeMetadata(t *testing.T) {
	node := func(labels, annotations map[string]string, mf ...metav1.ManagedFieldsEntry) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: labels, Annotations: annotations, ManagedFields: mf}}
	}
	for _, tc := range []struct {
		name          string
		node          *corev1.Node
		before        record.NodeMetadata
		nfd, operator bool
		want          NodeLabelPlan
		patch         map[string]any
	}{
		{
			name: "labels NFD and the operator wrote go, every other label stays",
			node: node(map[string]string{"kubernetes.io/hostname": "gpu-1", "feature.node.kubernetes.io/pci-10de.present": "true", "nvidia.com/gpu.present": "true", "team": "ml"},
				map[string]string{"nfd.node.kubernetes.io/feature-labels": "pci-10de.present", "other": "x"},
				kubetest.ManagedFields("kubelet", []string{"kubernetes.io/hostname", "team"}, []string{"other"}),
				kubetest.ManagedFields("nfd-master", []string{"feature.node.kubernetes.io/pci-10de.present"}, []string{"nfd.node.kubernetes.io/feature-labels"}),
				kubetest.ManagedFields("gpu-operator", []string{"nvidia.com/gpu.present"}, nil)),
			nfd: true, operator: true,
			want: NodeLabelPlan{Node: "gpu-1", RemoveLabels: []string{"feature.node.kubernetes.io/pci-10de.present", "nvidia.com/gpu.present"},
				RemoveAnnotations: []string{"nfd.node.kubernetes.io/feature-labels"}},
			patch: map[string]any{"metadata": map[string]any{
				"labels":      map[string]any{"feature.node.kubernetes.io/pci-10de.present": nil, "nvidia.com/gpu.present": nil},
				"annotations": map[string]any{"nfd.node.kubernetes.io/feature-labels": nil},
			}},
		},
		{
			name: "an admin's labels in the operator's prefix, set after the install with kubectl label, stay",
			node: node(map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/device-plugin.config": "a100"}, nil,
				kubetest.ManagedFields("gpu-operator", []string{"nvidia.com/gpu.present"}, nil),
				kubetest.ManagedFields("kubectl-label", []string{"nvidia.com/mig.config", "nvidia.com/device-plugin.config"}, nil)),
			nfd: true, operator: true,
			want: NodeLabelPlan{Node: "gpu-1", RemoveLabels: []string{"nvidia.com/gpu.present"}, Kept: []KeptKey{
				{Key: "nvidia.com/device-plugin.config", Managers: []string{"kubectl-label"}},
				{Key: "nvidia.com/mig.config", Managers: []string{"kubectl-label"}}}},
			patch: map[string]any{"metadata": map[string]any{"labels": map[string]any{"nvidia.com/gpu.present": nil}}},
		},
		{
			name: "a label the stack changed gets its value from before the install back; one it removed comes back",
			node: node(map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "A100"}, nil,
				kubetest.ManagedFields("gpu-operator", []string{"nvidia.com/gpu.product"}, nil), kubetest.ManagedFields("sandbox", []string{"nvidia.com/gpu.present"}, nil)),
			before: record.NodeMetadata{Labels: map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "H100", "nvidia.com/mig.config": "all-disabled"}},
			nfd:    true, operator: true,
			want:  NodeLabelPlan{Node: "gpu-1", RestoreLabels: map[string]string{"nvidia.com/gpu.product": "H100", "nvidia.com/mig.config": "all-disabled"}},
			patch: map[string]any{"metadata": map[string]any{"labels": map[string]any{"nvidia.com/gpu.product": "H100", "nvidia.com/mig.config": "all-disabled"}}},
		},
		{
			name:   "a label that was there before and that an admin changed since keeps the admin's value",
			node:   node(map[string]string{"nvidia.com/mig.config": "all-1g.10gb"}, nil, kubetest.ManagedFields("kubectl-label", []string{"nvidia.com/mig.config"}, nil)),
			before: record.NodeMetadata{Labels: map[string]string{"nvidia.com/mig.config": "all-disabled"}},
			nfd:    true, operator: true,
			want: NodeLabelPlan{Node: "gpu-1", Kept: []KeptKey{{Key: "nvidia.com/mig.config", Managers: []string{"kubectl-label"}}}},
		},
		{
			name: "NFD's labels stay when gpuctl did not install NFD",
			node: node(map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true", "nvidia.com/gpu.present": "true"}, nil,
				kubetest.ManagedFields("nfd-master", []string{"feature.node.kubernetes.io/pci-10de.present"}, nil), kubetest.ManagedFields("gpu-operator", []string{"nvidia.com/gpu.present"}, nil)),
			nfd: false, operator: true,
			want:  NodeLabelPlan{Node: "gpu-1", RemoveLabels: []string{"nvidia.com/gpu.present"}},
			patch: map[string]any{"metadata": map[string]any{"labels": map[string]any{"nvidia.com/gpu.present": nil}}},
		},
		{
			name: "a node as it was needs no patch",
			node: node(map[string]string{"kubernetes.io/hostname": "gpu-1"}, nil),
			nfd:  true, operator: true,
			want: NodeLabelPlan{Node: "gpu-1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := planNodeMetadata(tc.node, tc.before, tc.nfd, tc.operator)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan\n%+v\nwant\n%+v", got, tc.want)
			}
			if p := got.patch(tc.node); !reflect.DeepEqual(p, tc.patch) {
				t.Errorf("patch\n%v\nwant\n%v", p, tc.patch)
			}
		})
	}
}

func TestPlannedLabelChangeSomeoneTookOverIsLeft(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{"nvidia.com/gpu.present": "true"},
		ManagedFields: []metav1.ManagedFieldsEntry{kubetest.ManagedFields("gpu-operator", []string{"nvidia.com/gpu.present"}, nil)}}}
	p := planNodeMetadata(n, record.NodeMetadata{}, true, true)
	// Between the plan and its execution an admin sets the label themselves.
	n.ManagedFields = []metav1.ManagedFieldsEntry{kubetest.ManagedFields("kubectl-label", []string{"nvidia.com/gpu.present"}, nil)}
	if patch := p.patch(n); patch != nil {
		t.Errorf("patch %v removes a label an admin wrote after the plan", patch)
	}
}
