package migmanager

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/standintest"
)

// testConfigs is a mig-parted config in NVIDIA's format with configs named like the operator's
// default ones; its layouts are the tests' own.
const testConfigs = `
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.10gb:
    - device-filter: ["0x233010DE", "0x20B510DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
    - device-filter: "0x20B010DE"
      devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 4}
  all-2g.20gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"2g.20gb": 3}
  first-only:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
  too-many:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 8}
  over-slices:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 2, "2g.20gb": 1}
`

func TestApplyPartitionsLikeMigParted(t *testing.T) {
	cfgs, err := ParseConfigs([]byte(testConfigs))
	if err != nil {
		t.Fatal(err)
	}
	h100 := standin.Hardware{GPUs: 2, GPUProduct: standin.GPUH100SXM80}
	a100 := standin.Hardware{GPUs: 2, GPUProduct: standin.GPUA100SXM40}
	l4 := standin.Hardware{GPUs: 1, GPUProduct: standin.GPUL4}
	on := func(gpus ...map[string]int) standin.MIGLayout { return standin.MIGLayout{GPUs: gpus} }
	for _, tc := range []struct {
		name   string
		config string
		hw     standin.Hardware
		from   standin.MIGLayout
		want   standin.MIGLayout
		failed bool
	}{
		{name: "all-1g.10gb on an H100: seven 1g.10gb per GPU", config: "all-1g.10gb", hw: h100,
			want: on(map[string]int{"1g.10gb": 7}, map[string]int{"1g.10gb": 7})},
		{name: "all-1g.10gb on an A100 40GB: its own entry, four per GPU", config: "all-1g.10gb", hw: a100,
			want: on(map[string]int{"1g.10gb": 4}, map[string]int{"1g.10gb": 4})},
		{name: "all-1g.10gb on an L4: no entry matches its device, nothing changes", config: "all-1g.10gb", hw: l4, want: on(nil)},
		{name: "all-2g.20gb on an L4 fails: no MIG", config: "all-2g.20gb", hw: l4, failed: true},
		{name: "all-2g.20gb on an A100 40GB fails: no such profile", config: "all-2g.20gb", hw: a100, failed: true},
		{name: "more instances than a GPU holds fail", config: "too-many", hw: h100, failed: true},
		{name: "more than seven compute slices fail", config: "over-slices", hw: h100, failed: true},
		{name: "an unknown config fails", config: "all-9g.90gb", hw: h100, failed: true},
		{name: "all-disabled turns MIG off", config: "all-disabled", hw: h100,
			from: on(map[string]int{"1g.10gb": 7}, map[string]int{"1g.10gb": 7}), want: on(nil, nil)},
		{name: "a device list leaves the other GPUs as they were", config: "first-only", hw: h100,
			from: on(nil, map[string]int{"1g.10gb": 7}), want: on(map[string]int{"3g.40gb": 2}, map[string]int{"1g.10gb": 7})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cfgs.Apply(tc.config, tc.hw, tc.from)
			var applyErr *ApplyError
			if tc.failed {
				if !errors.As(err, &applyErr) {
					t.Fatalf("Apply = %v, %v; want an *ApplyError", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.GPUs) != len(tc.want.GPUs) || got.Config != tc.config {
				t.Fatalf("Apply = %+v, want %+v", got, tc.want)
			}
			for i := range got.GPUs {
				if !maps.Equal(got.GPUs[i], tc.want.GPUs[i]) || got.Enabled(i) != tc.want.Enabled(i) {
					t.Errorf("GPU %d: %v, want %v", i, got.GPUs[i], tc.want.GPUs[i])
				}
			}
		})
	}
}

func TestMIGManagerStandInDrivesTheStateLabel(t *testing.T) {
	cs := fake.NewClientset(
		standintest.Node("h100-0", "6.8.0", map[string]string{ConfigLabel: "all-1g.10gb"}),
		standintest.Node("l4-0", "6.8.0", map[string]string{ConfigLabel: "all-2g.20gb"}),
		standintest.Node("h100-idle", "6.8.0", map[string]string{ConfigLabel: "all-1g.10gb"}),
	)
	hw := map[string]standin.Hardware{
		"h100-0":    {GPUs: 1, GPUProduct: standin.GPUH100SXM80},
		"l4-0":      {GPUs: 1, GPUProduct: standin.GPUL4},
		"h100-idle": {GPUs: 1, GPUProduct: standin.GPUH100SXM80},
	}
	ctx := context.Background()
	// The operator's DaemonSet mounts its ConfigMap; it does not exist here, so the fallback is read.
	pod := func(node string) *corev1.Pod {
		p := standintest.Pod("gpu-operator", "nvidia-mig-manager-"+node, node, true, corev1.Container{
			Name: "nvidia-mig-manager", Image: "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0",
			VolumeMounts: []corev1.VolumeMount{{Name: "mig-parted-config", MountPath: configMountPath}},
		})
		p.Spec.Volumes = []corev1.Volume{{Name: "mig-parted-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "default-mig-parted-config"}}}}}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "nvidia-mig-manager"}}
		return p
	}
	for _, n := range []string{"h100-0", "l4-0"} {
		standintest.CreateTyped(t, cs.CoreV1().Pods("gpu-operator").Create, pod(n))
	}
	mig := standin.NewMIGHardware()
	standintest.Start(t, func(ctx context.Context, logf func(string, ...any)) error {
		return Run(ctx, cs, hw, mig, func() ([]byte, error) { return []byte(testConfigs), nil }, logf)
	})
	expect := func(node, state, layout string) func(ctx context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			n, err := standintest.GetNode(ctx, cs, node)
			if err != nil {
				return "", err
			}
			got, l := n.Labels[StateLabel], ""
			if applied := mig.Layout(node); applied.Config != "" {
				l = applied.Encode()
			}
			if got != state || l != layout {
				return fmt.Sprintf("%s: state %q layout %q, want %q and %q", node, got, l, state, layout), nil
			}
			if len(n.Annotations) > 0 {
				return fmt.Sprintf("%s: annotations %v: the GPUs' MIG state is not the API's", node, n.Annotations), nil
			}
			return "", nil
		}
	}
	standintest.EventuallyOK(t, "the H100 node is partitioned", expect("h100-0", StateSuccess, `{"config":"all-1g.10gb","gpus":[{"1g.10gb":7}]}`))
	standintest.EventuallyOK(t, "the L4 node fails", expect("l4-0", StateFailed, ""))
	standintest.ConsistentlyOK(t, "without a MIG-manager pod nothing happens", 300*time.Millisecond, expect("h100-idle", "", ""))

	// The admin picks another config: pending, then success with the new layout.
	if _, err := cs.CoreV1().Nodes().Patch(ctx, "h100-0", types.MergePatchType, []byte(`{"metadata":{"labels":{"nvidia.com/mig.config":"all-disabled"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	standintest.EventuallyOK(t, "all-disabled turns MIG off", expect("h100-0", StateSuccess, `{"config":"all-disabled","gpus":[null]}`))
}
