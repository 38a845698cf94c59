package taint

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestTolerates(t *testing.T) {
	tests := []struct {
		name        string
		tolerations []corev1.Toleration
		want        bool
	}{
		{
			name:        "NVIDIA's operand toleration (Exists, NoSchedule) tolerates the GPU taint",
			tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			want:        true,
		},
		{
			name:        "an Equal toleration with value present tolerates the GPU taint",
			tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "present", Effect: corev1.TaintEffectNoSchedule}},
			want:        true,
		},
		{
			name:        "an Equal toleration with another value does not tolerate the GPU taint",
			tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
			want:        false,
		},
		{
			name:        "a toleration for NoExecute only does not tolerate a NoSchedule taint",
			tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			want:        false,
		},
		{
			name:        "an empty key with Exists tolerates everything",
			tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			want:        true,
		},
		{
			name:        "the control-plane toleration the operator ships with does not tolerate the GPU taint",
			tolerations: []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule}},
			want:        false,
		},
		{
			name: "no tolerations tolerate nothing",
			want: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Tolerates(tt.tolerations, GPUTaint); got != tt.want {
				t.Errorf("Tolerates() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAdded(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        []corev1.Taint
		wantErr     bool
	}{
		{name: "a node without the annotation has no added taints"},
		{
			name:        "the recorded taints are returned",
			annotations: map[string]string{AddedTaintsAnnotation: `[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}]`},
			want:        []corev1.Taint{GPUTaint},
		},
		{
			name:        "an annotation that is not JSON is an error",
			annotations: map[string]string{AddedTaintsAnnotation: `nvidia.com/gpu`},
			wantErr:     true,
		},
		{
			name:        "an entry without an effect is an error",
			annotations: map[string]string{AddedTaintsAnnotation: `[{"key":"nvidia.com/gpu"}]`},
			wantErr:     true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &corev1.Node{}
			node.Name = "n"
			node.Annotations = tt.annotations
			got, err := Added(node)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Added() error = %v, wantErr %v", err, tt.wantErr)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("Added() = %v, want %v", got, tt.want)
			}
			for i := range got {
				if !sameTaint(got[i], tt.want[i]) {
					t.Errorf("Added()[%d] = %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestEncodeAddedIsStable(t *testing.T) {
	a := corev1.Taint{Key: "a", Value: "1", Effect: corev1.TaintEffectNoSchedule}
	b := corev1.Taint{Key: "b", Effect: corev1.TaintEffectNoExecute}
	t.Run("the same set in any order with duplicates encodes to the same string", func(t *testing.T) {
		x, err := encodeAdded([]corev1.Taint{b, a, a})
		if err != nil {
			t.Fatal(err)
		}
		y, err := encodeAdded([]corev1.Taint{a, b})
		if err != nil {
			t.Fatal(err)
		}
		if x != y {
			t.Errorf("encodings differ: %s vs %s", x, y)
		}
		want := `[{"key":"a","value":"1","effect":"NoSchedule"},{"key":"b","value":"","effect":"NoExecute"}]`
		if x != want {
			t.Errorf("encoding = %s, want %s", x, want)
		}
	})
}
