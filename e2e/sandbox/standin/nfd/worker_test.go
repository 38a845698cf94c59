package nfd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/standintest"
)

// The NFD objects as the node-feature-discovery v0.19 chart names them (kubernetes-sigs/node-feature-discovery@v0.19.0 deployments/helm/node-feature-discovery).
const (
	nfdTestNS      = "gpu-operator"
	nfdTestConfMap = "gpu-operator-node-feature-discovery-worker-conf"
)

func nfdWorkerContainer() corev1.Container {
	return corev1.Container{
		Name: "worker", Image: "registry.k8s.io/nfd/node-feature-discovery:v0.19.0",
		Command: []string{"nfd-worker"}, Args: []string{"-feature-gates=NodeFeatureAPI=true", "-config=/etc/kubernetes/node-feature-discovery/nfd-worker.conf"},
	}
}

func nfdWorkerDS() *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: nfdTestNS, Name: "gpu-operator-node-feature-discovery-worker"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{nfdWorkerContainer()},
		}}},
	}
}

func nfdWorkerPod(name, node string, withConfig bool) *corev1.Pod {
	p := standintest.Pod(nfdTestNS, name, node, true, nfdWorkerContainer())
	if withConfig {
		p.Spec.Volumes = []corev1.Volume{{Name: "nfd-worker-conf", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: nfdTestConfMap}},
		}}}
	}
	return p
}

func nfdMasterPod(ready bool) *corev1.Pod {
	return standintest.Pod(nfdTestNS, "gpu-operator-node-feature-discovery-master-5d8f7", "cp-0", ready, corev1.Container{
		Name: "master", Image: "registry.k8s.io/nfd/node-feature-discovery:v0.19.0", Command: []string{"nfd-master"},
	})
}

var (
	testGPUHardware = standin.Hardware{GPUs: 1, GPUPCIClass: "0302", GPUProduct: "NVIDIA-A100-SXM4-40GB", OSReleaseID: "ubuntu", OSVersionID: "22.04"}
	testKernel      = "5.15.0-1045-aws"
)

const (
	pciVendorLabel      = FeatureLabelNs + "/pci-10de.present"
	pciClassVendorLabel = FeatureLabelNs + "/pci-0302_10de.present"
	kernelFullLabel     = FeatureLabelNs + "/kernel-version.full"
)

func TestNFDStandInLabelsWhileInstalledAndRemovesOnlyItsOwnLabels(t *testing.T) {
	preset := map[string]string{
		"kubernetes.io/hostname":                 "gpu-0",
		FeatureLabelNs + "/system-os_release.ID": "ubuntu", // what NFD would say too: not the stand-in's
		FeatureLabelNs + "/custom-rdma.capable":  "true",   // someone else's
		FeatureLabelNs + "/kernel-version.full":  "stale",  // NFD corrects it, so it becomes NFD's
		"nvidia.com/gpu.present":                 "true",
	}
	cs := fake.NewClientset(standintest.Node("gpu-0", testKernel, preset), standintest.Node("cpu-0", testKernel, nil))
	ctx := context.Background()
	standintest.CreateTyped(t, cs.AppsV1().DaemonSets(nfdTestNS).Create, nfdWorkerDS())
	standintest.CreateTyped(t, cs.CoreV1().ConfigMaps(nfdTestNS).Create, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: nfdTestNS, Name: nfdTestConfMap},
		// The GPU operator's NFD overrides (NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0, key node-feature-discovery).
		Data: map[string]string{"nfd-worker.conf": "sources:\n  pci:\n    deviceClassWhitelist: [\"02\", \"0200\", \"0207\", \"0300\", \"0302\"]\n    deviceLabelFields: [vendor]\n"},
	})
	standintest.CreateTyped(t, cs.CoreV1().Pods(nfdTestNS).Create, nfdWorkerPod("worker-a", "gpu-0", true))
	standintest.CreateTyped(t, cs.CoreV1().Pods(nfdTestNS).Create, nfdWorkerPod("worker-b", "cpu-0", true))
	master := standintest.CreateTyped(t, cs.CoreV1().Pods(nfdTestNS).Create, nfdMasterPod(false))

	hw := map[string]standin.Hardware{"gpu-0": testGPUHardware, "cpu-0": {OSReleaseID: "ubuntu", OSVersionID: "22.04"}}
	standintest.Start(t, func(ctx context.Context, logf func(string, ...any)) error { return Run(ctx, cs, hw, logf) })

	standintest.ConsistentlyOK(t, "no labels while nfd-master is not ready", 300*time.Millisecond, func(ctx context.Context) (string, error) {
		n, err := standintest.GetNode(ctx, cs, "gpu-0")
		if err == nil && n.Labels[pciVendorLabel] != "" {
			return "node labelled before nfd-master was ready", nil
		}
		return "", err
	})

	master.Status.Conditions[0].Status = corev1.ConditionTrue
	if _, err := cs.CoreV1().Pods(nfdTestNS).UpdateStatus(ctx, master, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := Labels(testGPUHardware, corev1.NodeSystemInfo{KernelVersion: testKernel, OSImage: "Ubuntu 22.04.4 LTS"}, []string{"vendor"})
	if want[pciVendorLabel] != "true" {
		t.Fatalf("nfdLabels with deviceLabelFields [vendor] gives no %s: %v", pciVendorLabel, want)
	}
	standintest.EventuallyOK(t, "gpu-0 gets NFD's labels named by the worker config", func(ctx context.Context) (string, error) {
		n, err := standintest.GetNode(ctx, cs, "gpu-0")
		if err != nil {
			return "", err
		}
		if p := standintest.MissingLabels(n, want); p != "" {
			return "missing " + p, nil
		}
		if n.Labels[pciClassVendorLabel] != "" {
			return "class_vendor label despite deviceLabelFields [vendor]", nil
		}
		if ann := n.Annotations[FeatureLabelsAnnotation]; !slices.Contains(strings.Split(ann, ","), "pci-10de.present") {
			return fmt.Sprintf("annotation %s = %q", FeatureLabelsAnnotation, ann), nil
		}
		return "", nil
	})
	standintest.EventuallyOK(t, "cpu-0 gets kernel labels but no PCI label", func(ctx context.Context) (string, error) {
		n, err := standintest.GetNode(ctx, cs, "cpu-0")
		if err != nil {
			return "", err
		}
		if n.Labels[kernelFullLabel] != testKernel || n.Labels[pciVendorLabel] != "" {
			return fmt.Sprintf("labels %v", n.Labels), nil
		}
		return "", nil
	})

	// A worker restart: the pod goes, a new one comes.
	if err := cs.CoreV1().Pods(nfdTestNS).Delete(ctx, "worker-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	labelsStay := func(ctx context.Context) (string, error) {
		n, err := standintest.GetNode(ctx, cs, "gpu-0")
		if err != nil {
			return "", err
		}
		if p := standintest.MissingLabels(n, want); p != "" {
			return "lost " + p, nil
		}
		return "", nil
	}
	standintest.ConsistentlyOK(t, "labels stay while the worker pod is gone", 300*time.Millisecond, labelsStay)
	standintest.CreateTyped(t, cs.CoreV1().Pods(nfdTestNS).Create, nfdWorkerPod("worker-c", "gpu-0", true))
	standintest.ConsistentlyOK(t, "labels stay with the new worker pod", 300*time.Millisecond, labelsStay)

	// Uninstall: the DaemonSet goes.
	if err := cs.AppsV1().DaemonSets(nfdTestNS).Delete(ctx, "gpu-operator-node-feature-discovery-worker", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	standintest.EventuallyOK(t, "the stand-in's labels are removed, others' kept", func(ctx context.Context) (string, error) {
		n, err := standintest.GetNode(ctx, cs, "gpu-0")
		if err != nil {
			return "", err
		}
		for k := range want {
			if _, ok := n.Labels[k]; ok && preset[k] != n.Labels[k] {
				return "still has " + k, nil
			}
		}
		if _, ok := n.Labels[kernelFullLabel]; ok {
			return "kept kernel-version.full, which the stand-in had changed", nil
		}
		if _, ok := n.Annotations[FeatureLabelsAnnotation]; ok {
			return "annotation still there", nil
		}
		for k, v := range preset {
			if k != kernelFullLabel && n.Labels[k] != v {
				return fmt.Sprintf("pre-set label %s=%q became %q", k, v, n.Labels[k]), nil
			}
		}
		return "", nil
	})
}

func TestNFDStandInHonoursWorkerConfig(t *testing.T) {
	for _, tc := range []struct {
		name        string
		conf        *string
		wantLabel   string
		absentLabel string
	}{
		{name: "without a config NFD's default fields name the label class_vendor", wantLabel: pciClassVendorLabel, absentLabel: pciVendorLabel},
		{name: "an empty config keeps the defaults", conf: ptr.To(""), wantLabel: pciClassVendorLabel, absentLabel: pciVendorLabel},
		{name: "deviceLabelFields [vendor] names it by vendor only", conf: ptr.To("sources:\n  pci:\n    deviceLabelFields: [\"vendor\"]\n"), wantLabel: pciVendorLabel, absentLabel: pciClassVendorLabel},
		{name: "a whitelist of 03 covers class 0302", conf: ptr.To("sources:\n  pci:\n    deviceClassWhitelist: [\"03\"]\n"), wantLabel: pciClassVendorLabel},
		{name: "a whitelist without the GPU's class gives no PCI label", conf: ptr.To("sources:\n  pci:\n    deviceClassWhitelist: [\"0300\"]\n    deviceLabelFields: [vendor]\n"), absentLabel: pciVendorLabel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(standintest.Node("gpu-0", testKernel, nil))
			standintest.CreateTyped(t, cs.AppsV1().DaemonSets(nfdTestNS).Create, nfdWorkerDS())
			standintest.CreateTyped(t, cs.CoreV1().Pods(nfdTestNS).Create, nfdMasterPod(true))
			if tc.conf != nil {
				standintest.CreateTyped(t, cs.CoreV1().ConfigMaps(nfdTestNS).Create, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Namespace: nfdTestNS, Name: nfdTestConfMap},
					Data:       map[string]string{"nfd-worker.conf": *tc.conf},
				})
			}
			standintest.CreateTyped(t, cs.CoreV1().Pods(nfdTestNS).Create, nfdWorkerPod("worker-a", "gpu-0", tc.conf != nil))
			standintest.Start(t, func(ctx context.Context, logf func(string, ...any)) error {
				return Run(ctx, cs, map[string]standin.Hardware{"gpu-0": testGPUHardware}, logf)
			})
			standintest.EventuallyOK(t, "labels as configured", func(ctx context.Context) (string, error) {
				n, err := standintest.GetNode(ctx, cs, "gpu-0")
				if err != nil {
					return "", err
				}
				switch {
				case n.Labels[kernelFullLabel] == "":
					return "not labelled yet", nil
				case tc.wantLabel != "" && n.Labels[tc.wantLabel] != "true":
					return fmt.Sprintf("no %s in %v", tc.wantLabel, n.Labels), nil
				case tc.absentLabel != "" && n.Labels[tc.absentLabel] != "":
					return fmt.Sprintf("unexpected %s", tc.absentLabel), nil
				}
				return "", nil
			})
		})
	}
}

// Where NFD's own worker runs for a pod (sandbox/nfd), the stand-in leaves its node to it and labels
// only the nodes of the workers it does not run.
func TestNFDStandInLeavesTheRealWorkersNodesAlone(t *testing.T) {
	cs := fake.NewClientset(standintest.Node("gpu-0", testKernel, nil), standintest.Node("gpu-1", testKernel, nil))
	standintest.CreateTyped(t, cs.AppsV1().DaemonSets(nfdTestNS).Create, nfdWorkerDS())
	standintest.CreateTyped(t, cs.CoreV1().Pods(nfdTestNS).Create, nfdWorkerPod("worker-real", "gpu-0", false))
	standintest.CreateTyped(t, cs.CoreV1().Pods(nfdTestNS).Create, nfdWorkerPod("worker-other", "gpu-1", false))
	standintest.CreateTyped(t, cs.CoreV1().Pods(nfdTestNS).Create, nfdMasterPod(true))
	hw := map[string]standin.Hardware{"gpu-0": testGPUHardware, "gpu-1": testGPUHardware}
	real := func(p *corev1.Pod) bool { return p.Name == "worker-real" }
	standintest.Start(t, func(ctx context.Context, logf func(string, ...any)) error { return RunExcept(ctx, cs, hw, real, logf) })

	standintest.EventuallyOK(t, "gpu-1, whose worker the stand-in plays, gets NFD's labels", func(ctx context.Context) (string, error) {
		n, err := standintest.GetNode(ctx, cs, "gpu-1")
		if err != nil || n.Labels[kernelFullLabel] == "" {
			return "no kernel label on gpu-1", err
		}
		return "", nil
	})
	standintest.ConsistentlyOK(t, "gpu-0, whose worker is real, gets nothing from the stand-in", 300*time.Millisecond, func(ctx context.Context) (string, error) {
		n, err := standintest.GetNode(ctx, cs, "gpu-0")
		if err == nil && len(n.Annotations[FeatureLabelsAnnotation]) > 0 {
			return "the stand-in labelled gpu-0", nil
		}
		return "", err
	})
}
