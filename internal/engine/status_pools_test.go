package engine

import (
	"maps"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// poolNode is a GPU node of a GKE node pool with the given labels and allocatable resources.
func poolNode(name, pool string, labels map[string]string, allocatable map[string]string) corev1.Node {
	l := map[string]string{"nvidia.com/gpu.present": "true", "cloud.google.com/gke-nodepool": pool}
	maps.Copy(l, labels)
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{}}}
	for k, v := range allocatable {
		n.Status.Allocatable[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	return n
}

func TestPoolRows(t *testing.T) {
	shared := map[string]string{"nvidia.com/device-plugin.config": "time-slicing-4", "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4"}
	unshared := map[string]string{"nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.replicas": "1"}
	mixedMIG := map[string]string{"nvidia.com/mig.strategy": "mixed", "nvidia.com/mig.config": "all-1g.5gb", "nvidia.com/mig.config.state": "success"}
	tests := []struct {
		name   string
		nodes  []corev1.Node
		pods   []corev1.Pod
		dra    bool
		slices map[string][2]int // node → ResourceSlices, devices
		want   []PoolStatus
	}{
		{
			name: "a time-sliced pool shows its config, mode and replicas, the other pool none, each what its nodes advertise",
			nodes: []corev1.Node{
				poolNode("a1", "gpu-pool", shared, map[string]string{"nvidia.com/gpu": "32"}),
				poolNode("a2", "gpu-pool", shared, map[string]string{"nvidia.com/gpu": "32", "cpu": "8"}),
				poolNode("l1", "l4-pool", unshared, map[string]string{"nvidia.com/gpu": "1"}),
				{ObjectMeta: metav1.ObjectMeta{Name: "cpu-1", Labels: map[string]string{"cloud.google.com/gke-nodepool": "default-pool"}}},
			},
			want: []PoolStatus{
				{Name: "gpu-pool", Nodes: []string{"a1", "a2"}, DevicePluginConfig: "time-slicing-4", Sharing: "time-slicing", Replicas: 4,
					Advertised: map[string]int64{"nvidia.com/gpu": 64}},
				{Name: "l4-pool", Nodes: []string{"l1"}, Sharing: "none", Replicas: 1, Advertised: map[string]int64{"nvidia.com/gpu": 1}},
			},
		},
		{
			name: "a mixed MIG pool shows its strategy, config and state and its MIG resources",
			nodes: []corev1.Node{
				poolNode("a1", "gpu-pool", mixedMIG, map[string]string{"nvidia.com/mig-1g.5gb": "56", "nvidia.com/gpu": "0"}),
			},
			want: []PoolStatus{{Name: "gpu-pool", Nodes: []string{"a1"}, MIGStrategy: "mixed", MIGConfig: "all-1g.5gb", MIGConfigState: "success",
				Advertised: map[string]int64{"nvidia.com/mig-1g.5gb": 56, "nvidia.com/gpu": 0}}},
		},
		{
			name: "nodes of one pool that disagree show every value, and no single replica count",
			nodes: []corev1.Node{
				poolNode("a1", "gpu-pool", shared, nil),
				poolNode("a2", "gpu-pool", map[string]string{"nvidia.com/device-plugin.config": "mps-2", "nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "2",
					"nvidia.com/mig.config.state": "pending"}, nil),
			},
			want: []PoolStatus{{Name: "gpu-pool", Nodes: []string{"a1", "a2"}, DevicePluginConfig: "mps-2, time-slicing-4", Sharing: "mps, time-slicing",
				MIGConfigState: "pending"}},
		},
		{
			name:  "on the DRA stack a pool shows its kubelet plugins' health, ResourceSlices and devices",
			nodes: []corev1.Node{poolNode("a1", "gpu-pool", nil, nil), poolNode("a2", "gpu-pool", nil, nil)},
			pods: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": draKubeletPluginApp}}, Spec: corev1.PodSpec{NodeName: "a1"},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}},
			dra:    true,
			slices: map[string][2]int{"a1": {1, 8}},
			want:   []PoolStatus{{Name: "gpu-pool", Nodes: []string{"a1", "a2"}, DRADriver: "1/2 Ready", ResourceSlices: 1, Devices: 8}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := nodeRows(tt.nodes, tt.pods)
			if tt.dra {
				addDRANodeState(rows, tt.pods, nil)
				for i := range rows {
					rows[i].ResourceSlices, rows[i].Devices = tt.slices[rows[i].Name][0], tt.slices[rows[i].Name][1]
				}
			}
			got := poolRows(tt.nodes, rows, tt.dra)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("pools\n got %+v\nwant %+v", got, tt.want)
			}
			for _, r := range rows {
				if r.Pool == "" {
					t.Errorf("node row %s names no pool", r.Name)
				}
			}
		})
	}
}

func TestMIGCheck(t *testing.T) {
	row := func(name, config, state string) NodeStatus {
		return NodeStatus{Name: name, MIGConfig: config, MIGConfigState: state}
	}
	tests := []struct {
		name      string
		nodes     []NodeStatus
		wantState CheckState
		wantText  []string
	}{
		{"every node's config applied is ok", []NodeStatus{row("a", "all-1g.5gb", "success"), row("b", "all-disabled", "success")},
			CheckOK, []string{"applied on 2/2"}},
		{"a node in state failed fails, naming it and its config, with the mig-manager logs as the way out",
			[]NodeStatus{row("a", "all-1g.5gb", "success"), row("l4", "all-1g.5gb", "failed")},
			CheckFailed, []string{"l4 (all-1g.5gb)", "failed", "logs", "app=nvidia-mig-manager"}},
		{"a node still pending is a warning", []NodeStatus{row("a", "all-1g.5gb", "pending")}, CheckWarning, []string{"pending", "a"}},
		{"a node rebooting to apply its config is a warning", []NodeStatus{row("a", "all-1g.5gb", "rebooting")}, CheckWarning, []string{"rebooting", "a"}},
		{"failed wins over pending", []NodeStatus{row("a", "x", "pending"), row("b", "x", "failed")}, CheckFailed, []string{"b (x)", "pending on a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := migCheck(tt.nodes, "gpu-operator")
			if c.Name != "mig" || c.State != tt.wantState {
				t.Errorf("check %+v, want mig %s", c, tt.wantState)
			}
			text := c.Message + " | " + c.Hint
			for _, w := range tt.wantText {
				if !strings.Contains(text, w) {
					t.Errorf("check %q lacks %q", text, w)
				}
			}
			if c.State != CheckOK && c.Hint == "" {
				t.Errorf("check %+v has no hint", c)
			}
		})
	}
}

func TestEvaluateStatusMIG(t *testing.T) {
	t.Run("a stack without any MIG label has no mig check", func(t *testing.T) {
		res := evaluateStatus(statusInputs{namespace: "gpu-operator", nodes: []corev1.Node{poolNode("a", "p", nil, nil)}})
		for _, c := range res.Checks {
			if c.Name == "mig" {
				t.Errorf("mig check %+v on a stack without MIG", c)
			}
		}
		if len(res.Pools) != 1 {
			t.Errorf("pools %+v", res.Pools)
		}
	})
	t.Run("a node whose MIG config failed makes the stack not healthy", func(t *testing.T) {
		res := evaluateStatus(statusInputs{namespace: "gpu-operator",
			nodes: []corev1.Node{poolNode("l4", "p", map[string]string{"nvidia.com/mig.config": "all-1g.5gb", "nvidia.com/mig.config.state": "failed"}, nil)}})
		if res.Healthy || !hasFailed(res, "mig", "l4") {
			t.Errorf("healthy %v, checks %+v", res.Healthy, res.Checks)
		}
	})
}
