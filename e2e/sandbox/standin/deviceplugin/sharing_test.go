package deviceplugin

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/standintest"
)

// operatorPod is a pod of the GPU operator's DaemonSet ds as the operator shapes it with
// devicePlugin.config (the ConfigMap at /available-configs, DEFAULT_CONFIG on the config-manager) and
// mig.strategy (MIG_STRATEGY).
func operatorPod(ds, node, program, configMap, def, migStrategy string) *corev1.Pod {
	main := corev1.Container{Name: program, Image: "nvcr.io/nvidia/k8s-device-plugin:v0.20.0", Command: []string{program},
		Env:          []corev1.EnvVar{{Name: "MIG_STRATEGY", Value: migStrategy}},
		VolumeMounts: []corev1.VolumeMount{{Name: configMap, MountPath: "/available-configs"}}}
	sidecar := corev1.Container{Name: "config-manager", Image: main.Image, Command: []string{"config-manager"},
		Env:          []corev1.EnvVar{{Name: "DEFAULT_CONFIG", Value: def}, {Name: "NODE_LABEL", Value: ConfigLabel}},
		VolumeMounts: []corev1.VolumeMount{{Name: configMap, MountPath: "/available-configs"}}}
	p := standintest.Pod("gpu-operator", ds+"-"+node, node, true, main, sidecar)
	p.Spec.Volumes = []corev1.Volume{{Name: configMap, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}}}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds}}
	return p
}

func timeSlicing(replicas int) string {
	return fmt.Sprintf(`{"version":"v1","sharing":{"timeSlicing":{"resources":[{"name":"nvidia.com/gpu","replicas":%d}]}}}`, replicas)
}

func TestDevicePluginStandInFollowsTheConfigManager(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(
		standintest.Node("l4-0", "6.8.0", nil),
		standintest.Node("h100-0", "6.8.0", nil),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-operator", Name: "sharing"},
			Data: map[string]string{"four": timeSlicing(4), "two": timeSlicing(2)}},
	)
	hw := map[string]standin.Hardware{
		"l4-0":   {GPUs: 2, GPUProduct: standin.GPUL4},
		"h100-0": {GPUs: 1, GPUProduct: standin.GPUH100SXM80},
	}
	for _, p := range []*corev1.Pod{
		operatorPod("nvidia-device-plugin-daemonset", "l4-0", "nvidia-device-plugin", "sharing", "", "single"),
		operatorPod("gpu-feature-discovery", "l4-0", "gpu-feature-discovery", "sharing", "", "single"),
		operatorPod("nvidia-device-plugin-daemonset", "h100-0", "nvidia-device-plugin", "sharing", "", "mixed"),
		operatorPod("gpu-feature-discovery", "h100-0", "gpu-feature-discovery", "sharing", "", "mixed"),
	} {
		standintest.CreateTyped(t, cs.CoreV1().Pods("gpu-operator").Create, p)
	}
	mig := standin.NewMIGHardware()
	standintest.Start(t, func(ctx context.Context, logf func(string, ...any)) error { return Run(ctx, cs, hw, mig, logf) })
	expect := func(node string, res map[corev1.ResourceName]string, labels map[string]string) func(ctx context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			n, err := standintest.GetNode(ctx, cs, node)
			if err != nil {
				return "", err
			}
			for name, want := range res {
				a := n.Status.Allocatable[name]
				c := n.Status.Capacity[name]
				if a.String() != want || c.String() != want {
					return fmt.Sprintf("%s: %s capacity %s allocatable %s, want %s", node, name, c.String(), a.String(), want), nil
				}
			}
			return standintest.MissingLabels(n, labels), nil
		}
	}
	label := func(node, value string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, ConfigLabel, value)
		if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	standintest.EventuallyOK(t, "no label and no default: no sharing", expect("l4-0", map[corev1.ResourceName]string{"nvidia.com/gpu": "2"},
		map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/mig.capable": "false"}))

	label("l4-0", "four")
	standintest.EventuallyOK(t, "the label picks four replicas", expect("l4-0", map[corev1.ResourceName]string{"nvidia.com/gpu": "8"},
		map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4-SHARED", "nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.count": "2"}))

	// Editing the ConfigMap does nothing until the label changes: config-manager watches the label only.
	cm, err := cs.CoreV1().ConfigMaps("gpu-operator").Get(ctx, "sharing", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["four"], cm.Data["two"] = timeSlicing(3), timeSlicing(5)
	if _, err := cs.CoreV1().ConfigMaps("gpu-operator").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	label("h100-0", "unrelated") // an unrelated node event
	standintest.ConsistentlyOK(t, "an edited ConfigMap is not re-read", 300*time.Millisecond, expect("l4-0", map[corev1.ResourceName]string{"nvidia.com/gpu": "8"}, nil))
	label("l4-0", "two")
	standintest.EventuallyOK(t, "a label change re-reads it", expect("l4-0", map[corev1.ResourceName]string{"nvidia.com/gpu": "10"},
		map[string]string{"nvidia.com/gpu.replicas": "5"}))

	// MIG mixed on the H100 once MIG manager partitioned its GPU.
	standintest.EventuallyOK(t, "MIG off: the whole GPU", expect("h100-0", map[corev1.ResourceName]string{"nvidia.com/gpu": "1"},
		map[string]string{"nvidia.com/mig.capable": "true", "nvidia.com/mig.strategy": "mixed"}))
	mig.Set("h100-0", standin.MIGLayout{Config: "all-1g.10gb", GPUs: []map[string]int{{"1g.10gb": 7}}})
	standintest.EventuallyOK(t, "mixed: nvidia.com/mig-1g.10gb, and nvidia.com/gpu drops to 0", expect("h100-0",
		map[corev1.ResourceName]string{"nvidia.com/mig-1g.10gb": "7", "nvidia.com/gpu": "0"},
		map[string]string{"nvidia.com/mig-1g.10gb.count": "7", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}))
}
