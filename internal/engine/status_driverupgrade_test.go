package engine

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/health"
)

func TestDriverUpgradeCheck(t *testing.T) {
	node := func(name, state string, extra ...string) corev1.Node {
		labels := map[string]string{"nvidia.com/gpu.present": "true"}
		if state != "" {
			labels[health.DriverUpgradeStateLabel] = state
		}
		for i := 0; i+1 < len(extra); i += 2 {
			labels[extra[i]] = extra[i+1]
		}
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	for _, tc := range []struct {
		name  string
		nodes []corev1.Node
		state CheckState
		want  []string // in the message or the hint
	}{
		{"nodes without upgrade states pass", []corev1.Node{node("gpu-1", ""), node("gpu-2", "upgrade-done")}, CheckOK, []string{"no driver upgrade"}},
		{"a node in upgrade-failed fails the check, named, with NVIDIA's way out", []corev1.Node{node("gpu-1", "upgrade-failed"), node("gpu-2", "upgrade-done")}, CheckFailed,
			[]string{"gpu-1", "upgrade-failed", "delete", "gpu-driver-upgrades.html"}},
		{"a node in upgrade-required that is marked to skip upgrades is stuck", []corev1.Node{node("gpu-1", "upgrade-required", "nvidia.com/gpu-driver-upgrade.skip", "true")}, CheckFailed,
			[]string{"gpu-1", "nvidia.com/gpu-driver-upgrade.skip"}},
		{"a node waiting in upgrade-required while the controller works is a warning", []corev1.Node{node("gpu-1", "upgrade-required"), node("gpu-2", "drain-required")}, CheckWarning,
			[]string{"gpu-1", "gpu-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := driverUpgradeCheck(nodeRows(tc.nodes, nil), "gpu-operator")
			if c.State != tc.state {
				t.Errorf("state %s, want %s: %+v", c.State, tc.state, c)
			}
			for _, w := range tc.want {
				if !strings.Contains(c.Message+" "+c.Hint, w) {
					t.Errorf("%q not in %+v", w, c)
				}
			}
		})
	}
	t.Run("a failed driver upgrade makes the stack not ready", func(t *testing.T) {
		res := evaluateStatus(statusInputs{namespace: "gpu-operator", nodes: []corev1.Node{node("gpu-1", "upgrade-failed")}})
		if res.Healthy || !hasFailed(res, "driver upgrades", "gpu-1") {
			t.Errorf("healthy %v, checks %+v", res.Healthy, res.Checks)
		}
	})
}
