package engine

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/plan"
)

func TestMetadataPatch(t *testing.T) {
	node := func(labels, annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: labels, Annotations: annotations}}
	}
	for _, tc := range []struct {
		name          string
		node          *corev1.Node
		before        NodeMetadata
		nfd, operator bool
		want          map[string]any
	}{
		{
			name: "labels NFD and the operator added are removed, every other label stays",
			node: node(map[string]string{"kubernetes.io/hostname": "gpu-1", "feature.node.kubernetes.io/pci-10de.present": "true",
				"nvidia.com/gpu.present": "true", "team": "ml"}, map[string]string{"nfd.node.kubernetes.io/feature-labels": "pci-10de.present", "other": "x"}),
			nfd: true, operator: true,
			want: map[string]any{"metadata": map[string]any{
				"labels":      map[string]any{"feature.node.kubernetes.io/pci-10de.present": nil, "nvidia.com/gpu.present": nil},
				"annotations": map[string]any{"nfd.node.kubernetes.io/feature-labels": nil},
			}},
		},
		{
			name:   "a label that was there before the install keeps its value, or gets it back",
			node:   node(map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "A100"}, nil),
			before: NodeMetadata{Labels: map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "H100", "nvidia.com/mig.config": "all-disabled"}},
			nfd:    true, operator: true,
			want: map[string]any{"metadata": map[string]any{"labels": map[string]any{"nvidia.com/gpu.product": "H100", "nvidia.com/mig.config": "all-disabled"}}},
		},
		{
			name: "NFD's labels stay when gpuctl did not install NFD",
			node: node(map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true", "nvidia.com/gpu.present": "true"}, nil),
			nfd:  false, operator: true,
			want: map[string]any{"metadata": map[string]any{"labels": map[string]any{"nvidia.com/gpu.present": nil}}},
		},
		{
			name: "a node as it was needs no patch",
			node: node(map[string]string{"kubernetes.io/hostname": "gpu-1"}, nil),
			nfd:  true, operator: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := metadataPatch(tc.node, tc.before, tc.nfd, tc.operator)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("patch\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}

func TestFinalizerHintNamesTheObjectAndHowToProceed(t *testing.T) {
	hint := finalizerHint(&FinalizerError{Object: "ClusterPolicy cluster-policy", Finalizers: []string{"example.com/hold"}})
	for _, want := range []string{"example.com/hold", "kubectl patch clusterpolicy cluster-policy", "gpuctl uninstall again"} {
		if !contains(hint, want) {
			t.Errorf("hint %q lacks %q", hint, want)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestReleasesAreUninstalledInReverseInstallOrder(t *testing.T) {
	names := []string{plan.NFDRelease, plan.GKEDriverInstaller + "-cos", plan.OperatorRelease, plan.MonitoringRelease}
	slices.SortStableFunc(names, func(a, b string) int { return releaseOrder(a) - releaseOrder(b) })
	want := []string{plan.MonitoringRelease, plan.OperatorRelease, plan.GKEDriverInstaller + "-cos", plan.NFDRelease}
	if !slices.Equal(names, want) {
		t.Errorf("order %v, want %v (the dashboard and alerts go before the operator they watch)", names, want)
	}
}
