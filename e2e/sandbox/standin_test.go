package sandbox

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

const standInTimeout = 10 * time.Second

// startStandIn runs a stand-in until the test ends and checks that it stops cleanly.
func startStandIn(t *testing.T, run func(ctx context.Context, logf func(string, ...any)) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, t.Logf) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("stand-in returned %v", err)
			}
		case <-time.After(standInTimeout):
			t.Errorf("stand-in did not stop")
		}
	})
}

// eventuallyOK fails the test unless cond holds within standInTimeout; cond's last complaint is reported.
func eventuallyOK(t *testing.T, what string, cond func(ctx context.Context) (problem string, err error)) {
	t.Helper()
	last := ""
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, standInTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := cond(ctx)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		if err != nil {
			p = err.Error()
		}
		last = p
		return p == "", nil
	})
	if err != nil {
		t.Fatalf("%s: %v; last seen: %s", what, err, last)
	}
}

// consistentlyOK fails the test if cond stops holding during d.
func consistentlyOK(t *testing.T, what string, d time.Duration, cond func(ctx context.Context) (problem string, err error)) {
	t.Helper()
	ctx := context.Background()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		p, err := cond(ctx)
		if err != nil {
			p = err.Error()
		}
		if p != "" {
			t.Fatalf("%s: %s", what, p)
		}
	}
}

func createTyped[T any](t *testing.T, create func(context.Context, T, metav1.CreateOptions) (T, error), obj T) T {
	t.Helper()
	out, err := create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func createUnstructured(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) {
	t.Helper()
	if _, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func standInNode(name, kernel string, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{
			NodeInfo: corev1.NodeSystemInfo{KernelVersion: kernel, OSImage: "Ubuntu 22.04.4 LTS"},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
		},
	}
}

func standInPod(ns, name, node string, ready bool, containers ...corev1.Container) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name + "/" + fmt.Sprint(time.Now().UnixNano()))},
		Spec:       corev1.PodSpec{NodeName: node, Containers: containers},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return p
}

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
	p := standInPod(nfdTestNS, name, node, true, nfdWorkerContainer())
	if withConfig {
		p.Spec.Volumes = []corev1.Volume{{Name: "nfd-worker-conf", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: nfdTestConfMap}},
		}}}
	}
	return p
}

func nfdMasterPod(ready bool) *corev1.Pod {
	return standInPod(nfdTestNS, "gpu-operator-node-feature-discovery-master-5d8f7", "cp-0", ready, corev1.Container{
		Name: "master", Image: "registry.k8s.io/nfd/node-feature-discovery:v0.19.0", Command: []string{"nfd-master"},
	})
}

var (
	testGPUHardware = Hardware{GPUs: 1, GPUPCIClass: "0302", GPUProduct: "NVIDIA-A100-SXM4-40GB", OSReleaseID: "ubuntu", OSVersionID: "22.04"}
	testKernel      = "5.15.0-1045-aws"
)

const (
	pciVendorLabel      = nfdFeatureLabelNs + "/pci-10de.present"
	pciClassVendorLabel = nfdFeatureLabelNs + "/pci-0302_10de.present"
	kernelFullLabel     = nfdFeatureLabelNs + "/kernel-version.full"
)

func getTestNode(ctx context.Context, cs kubernetes.Interface, name string) (*corev1.Node, error) {
	return cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// missingLabels lists the labels of want that node lacks or has with another value.
func missingLabels(node *corev1.Node, want map[string]string) string {
	var miss []string
	for k, v := range want {
		if node.Labels[k] != v {
			miss = append(miss, fmt.Sprintf("%s=%q (have %q)", k, v, node.Labels[k]))
		}
	}
	slices.Sort(miss)
	return strings.Join(miss, ", ")
}

func TestNFDStandInLabelsWhileInstalledAndRemovesOnlyItsOwnLabels(t *testing.T) {
	preset := map[string]string{
		"kubernetes.io/hostname":                    "gpu-0",
		nfdFeatureLabelNs + "/system-os_release.ID": "ubuntu", // what NFD would say too: not the stand-in's
		nfdFeatureLabelNs + "/custom-rdma.capable":  "true",   // someone else's
		nfdFeatureLabelNs + "/kernel-version.full":  "stale",  // NFD corrects it, so it becomes NFD's
		"nvidia.com/gpu.present":                    "true",
	}
	cs := fake.NewClientset(standInNode("gpu-0", testKernel, preset), standInNode("cpu-0", testKernel, nil))
	ctx := context.Background()
	createTyped(t, cs.AppsV1().DaemonSets(nfdTestNS).Create, nfdWorkerDS())
	createTyped(t, cs.CoreV1().ConfigMaps(nfdTestNS).Create, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: nfdTestNS, Name: nfdTestConfMap},
		// The GPU operator's NFD overrides (NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0, key node-feature-discovery).
		Data: map[string]string{"nfd-worker.conf": "sources:\n  pci:\n    deviceClassWhitelist: [\"02\", \"0200\", \"0207\", \"0300\", \"0302\"]\n    deviceLabelFields: [vendor]\n"},
	})
	createTyped(t, cs.CoreV1().Pods(nfdTestNS).Create, nfdWorkerPod("worker-a", "gpu-0", true))
	createTyped(t, cs.CoreV1().Pods(nfdTestNS).Create, nfdWorkerPod("worker-b", "cpu-0", true))
	master := createTyped(t, cs.CoreV1().Pods(nfdTestNS).Create, nfdMasterPod(false))

	hw := map[string]Hardware{"gpu-0": testGPUHardware, "cpu-0": {OSReleaseID: "ubuntu", OSVersionID: "22.04"}}
	startStandIn(t, func(ctx context.Context, logf func(string, ...any)) error { return runNFDStandIn(ctx, cs, hw, logf) })

	consistentlyOK(t, "no labels while nfd-master is not ready", 300*time.Millisecond, func(ctx context.Context) (string, error) {
		n, err := getTestNode(ctx, cs, "gpu-0")
		if err == nil && n.Labels[pciVendorLabel] != "" {
			return "node labelled before nfd-master was ready", nil
		}
		return "", err
	})

	master.Status.Conditions[0].Status = corev1.ConditionTrue
	if _, err := cs.CoreV1().Pods(nfdTestNS).UpdateStatus(ctx, master, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := nfdLabels(testGPUHardware, corev1.NodeSystemInfo{KernelVersion: testKernel, OSImage: "Ubuntu 22.04.4 LTS"}, []string{"vendor"})
	if want[pciVendorLabel] != "true" {
		t.Fatalf("nfdLabels with deviceLabelFields [vendor] gives no %s: %v", pciVendorLabel, want)
	}
	eventuallyOK(t, "gpu-0 gets NFD's labels named by the worker config", func(ctx context.Context) (string, error) {
		n, err := getTestNode(ctx, cs, "gpu-0")
		if err != nil {
			return "", err
		}
		if p := missingLabels(n, want); p != "" {
			return "missing " + p, nil
		}
		if n.Labels[pciClassVendorLabel] != "" {
			return "class_vendor label despite deviceLabelFields [vendor]", nil
		}
		if ann := n.Annotations[nfdFeatureLabelsAnnotation]; !slices.Contains(strings.Split(ann, ","), "pci-10de.present") {
			return fmt.Sprintf("annotation %s = %q", nfdFeatureLabelsAnnotation, ann), nil
		}
		return "", nil
	})
	eventuallyOK(t, "cpu-0 gets kernel labels but no PCI label", func(ctx context.Context) (string, error) {
		n, err := getTestNode(ctx, cs, "cpu-0")
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
		n, err := getTestNode(ctx, cs, "gpu-0")
		if err != nil {
			return "", err
		}
		if p := missingLabels(n, want); p != "" {
			return "lost " + p, nil
		}
		return "", nil
	}
	consistentlyOK(t, "labels stay while the worker pod is gone", 300*time.Millisecond, labelsStay)
	createTyped(t, cs.CoreV1().Pods(nfdTestNS).Create, nfdWorkerPod("worker-c", "gpu-0", true))
	consistentlyOK(t, "labels stay with the new worker pod", 300*time.Millisecond, labelsStay)

	// Uninstall: the DaemonSet goes.
	if err := cs.AppsV1().DaemonSets(nfdTestNS).Delete(ctx, "gpu-operator-node-feature-discovery-worker", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyOK(t, "the stand-in's labels are removed, others' kept", func(ctx context.Context) (string, error) {
		n, err := getTestNode(ctx, cs, "gpu-0")
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
		if _, ok := n.Annotations[nfdFeatureLabelsAnnotation]; ok {
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
			cs := fake.NewClientset(standInNode("gpu-0", testKernel, nil))
			createTyped(t, cs.AppsV1().DaemonSets(nfdTestNS).Create, nfdWorkerDS())
			createTyped(t, cs.CoreV1().Pods(nfdTestNS).Create, nfdMasterPod(true))
			if tc.conf != nil {
				createTyped(t, cs.CoreV1().ConfigMaps(nfdTestNS).Create, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Namespace: nfdTestNS, Name: nfdTestConfMap},
					Data:       map[string]string{"nfd-worker.conf": *tc.conf},
				})
			}
			createTyped(t, cs.CoreV1().Pods(nfdTestNS).Create, nfdWorkerPod("worker-a", "gpu-0", tc.conf != nil))
			startStandIn(t, func(ctx context.Context, logf func(string, ...any)) error {
				return runNFDStandIn(ctx, cs, map[string]Hardware{"gpu-0": testGPUHardware}, logf)
			})
			eventuallyOK(t, "labels as configured", func(ctx context.Context) (string, error) {
				n, err := getTestNode(ctx, cs, "gpu-0")
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

func TestNVIDIADevicePluginPodRecognition(t *testing.T) {
	owned := standInPod("gpu-operator", "nvidia-device-plugin-daemonset-x7k2p", "gpu-0", true, corev1.Container{
		Name: "nvidia-device-plugin", Image: "nvcr.io/nvidia/k8s-device-plugin:v0.20.0", Command: []string{"/bin/bash", "-c"}, Args: []string{"/bin/entrypoint.sh"},
	})
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "nvidia-device-plugin-daemonset"}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"the GPU operator's device-plugin DaemonSet pod registers", owned, true},
		{"NVIDIA's standalone chart registers", standInPod("nvdp", "nvdp-nvidia-device-plugin-abcde", "gpu-0", true, corev1.Container{
			Name: "nvidia-device-plugin-ctr", Image: "nvcr.io/nvidia/k8s-device-plugin:v0.20.0", Command: []string{"nvidia-device-plugin"},
		}), true},
		{"GKE's device plugin registers", standInPod("kube-system", "nvidia-gpu-device-plugin-small-cos-5xq2w", "gpu-0", true, corev1.Container{
			Name: "nvidia-gpu-device-plugin", Image: "gke.gcr.io/nvidia-gpu-device-plugin@sha256:4b36a8d1e2f0",
		}), true},
		{"gpu-feature-discovery from the same image does not", standInPod("nvdp", "nvdp-gpu-feature-discovery-abcde", "gpu-0", true, corev1.Container{
			Name: "gpu-feature-discovery-ctr", Image: "nvcr.io/nvidia/k8s-device-plugin:v0.20.0", Command: []string{"gpu-feature-discovery"},
		}), false},
		{"an unrelated pod does not", standInPod("default", "web", "gpu-0", true, corev1.Container{Name: "web", Image: "nginx"}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isNVIDIADevicePluginPod(tc.pod); got != tc.want {
				t.Errorf("isNVIDIADevicePluginPod = %v, want %v", got, tc.want)
			}
		})
	}
}

func gpuResources(n *corev1.Node) (capacity, allocatable string) {
	c, okc := n.Status.Capacity[nvidiaGPUResource]
	a, oka := n.Status.Allocatable[nvidiaGPUResource]
	capacity, allocatable = "absent", "absent"
	if okc {
		capacity = c.String()
	}
	if oka {
		allocatable = a.String()
	}
	return capacity, allocatable
}

func TestDevicePluginStandInAdvertisesGPUsWhileThePluginRuns(t *testing.T) {
	cs := fake.NewClientset(standInNode("gpu-0", testKernel, nil), standInNode("cpu-0", testKernel, nil))
	ctx := context.Background()
	hw := map[string]Hardware{"gpu-0": {GPUs: 2, GPUPCIClass: "0302"}, "cpu-0": {}}
	plugin := func(name, node string, ready bool) *corev1.Pod {
		p := standInPod("gpu-operator", name, node, ready, corev1.Container{Name: "nvidia-device-plugin", Image: "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"})
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "nvidia-device-plugin-daemonset"}}
		return p
	}
	pod := createTyped(t, cs.CoreV1().Pods("gpu-operator").Create, plugin("plugin-gpu", "gpu-0", false))
	createTyped(t, cs.CoreV1().Pods("gpu-operator").Create, plugin("plugin-cpu", "cpu-0", true))
	startStandIn(t, func(ctx context.Context, logf func(string, ...any)) error {
		return runDevicePluginStandIn(ctx, cs, hw, logf)
	})
	expect := func(node, wantCap, wantAlloc string) func(ctx context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			n, err := getTestNode(ctx, cs, node)
			if err != nil {
				return "", err
			}
			if c, a := gpuResources(n); c != wantCap || a != wantAlloc {
				return fmt.Sprintf("%s: capacity %s allocatable %s, want %s and %s", node, c, a, wantCap, wantAlloc), nil
			}
			if n.Status.Capacity.Cpu().String() != "8" {
				return "other capacity lost", nil
			}
			return "", nil
		}
	}
	consistentlyOK(t, "nothing while the plugin is not ready", 300*time.Millisecond, expect("gpu-0", "absent", "absent"))

	pod.Status.Conditions[0].Status = corev1.ConditionTrue
	if _, err := cs.CoreV1().Pods("gpu-operator").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyOK(t, "gpu-0 advertises its 2 GPUs", expect("gpu-0", "2", "2"))
	consistentlyOK(t, "a node without GPUs advertises none", 200*time.Millisecond, expect("cpu-0", "absent", "absent"))

	// Something rewrites the node's status without the extended resource.
	if _, err := cs.CoreV1().Nodes().Patch(ctx, "gpu-0", types.MergePatchType,
		[]byte(`{"status":{"capacity":{"nvidia.com/gpu":null},"allocatable":{"nvidia.com/gpu":null}}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	eventuallyOK(t, "the stand-in puts nvidia.com/gpu back", expect("gpu-0", "2", "2"))

	if err := cs.CoreV1().Pods("gpu-operator").Delete(ctx, "plugin-gpu", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyOK(t, "with the plugin gone allocatable is 0 and capacity stays", expect("gpu-0", "2", "0"))
}

// OLM fixtures: the catalog as the OpenShift flavour serves it (NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst).
const (
	gpuOperatorNS  = "nvidia-gpu-operator"
	gpuOperatorCSV = "gpu-operator-certified.v26.7.0"
	marketplaceNS  = "openshift-marketplace"
	testAlmExample = `[{"apiVersion":"nvidia.com/v1","kind":"ClusterPolicy","metadata":{"name":"gpu-cluster-policy"},"spec":{"cdi":{"enabled":true}}}]`
)

func testObject(apiVersion, kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(fields)}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func testPackage(name, catalog, defaultChannel string, channels ...map[string]any) *unstructured.Unstructured {
	var ch []any
	for _, c := range channels {
		ch = append(ch, c)
	}
	return testObject("packages.operators.coreos.com/v1", "PackageManifest", marketplaceNS, name, map[string]any{"status": map[string]any{
		"packageName": name, "catalogSource": catalog, "catalogSourceNamespace": marketplaceNS,
		"defaultChannel": defaultChannel, "channels": ch,
	}})
}

func testChannel(name, csv, version string, annotations map[string]any) map[string]any {
	return map[string]any{"name": name, "currentCSV": csv, "currentCSVDesc": map[string]any{
		"displayName": "some operator", "version": version, "annotations": annotations,
	}}
}

func testSubscription(ns, name, pkg, catalog, approval string, extra map[string]any) *unstructured.Unstructured {
	spec := map[string]any{"name": pkg, "source": catalog, "sourceNamespace": marketplaceNS, "installPlanApproval": approval}
	for k, v := range extra {
		spec[k] = v
	}
	return testObject(olmAPIVersion, olmKindSub, ns, name, map[string]any{"spec": spec})
}

func testOperatorGroup(ns string, targets ...any) *unstructured.Unstructured {
	return testObject("operators.coreos.com/v1", olmKindGroup, ns, ns+"-group", map[string]any{"spec": map[string]any{"targetNamespaces": targets}})
}

// olmFixture is a typed and a dynamic fake client with the catalogs of an OpenShift cluster, and the
// OLM stand-in running against them.
func olmFixture(t *testing.T, objs ...runtime.Object) (*fake.Clientset, dynamic.Interface) {
	t.Helper()
	listKinds := map[schema.GroupVersionResource]string{
		olmSubscriptionsGVR: "SubscriptionList", olmInstallPlansGVR: "InstallPlanList", olmCSVsGVR: "ClusterServiceVersionList",
		olmCatalogSourcesGVR: "CatalogSourceList", olmOperatorGroupsGVR: "OperatorGroupList",
		olmPackageManifestsGVR: "PackageManifestList", nfdOpenShiftGVR: "NodeFeatureDiscoveryList",
	}
	base := []runtime.Object{
		testObject(olmAPIVersion, "CatalogSource", marketplaceNS, "certified-operators", map[string]any{"spec": map[string]any{"sourceType": "grpc"}}),
		testObject(olmAPIVersion, "CatalogSource", marketplaceNS, "redhat-operators", map[string]any{"spec": map[string]any{"sourceType": "grpc"}}),
		testPackage("gpu-operator-certified", "certified-operators", "v26.7",
			testChannel("stable", gpuOperatorCSV, "26.7.0", map[string]any{"alm-examples": testAlmExample}),
			testChannel("v26.7", gpuOperatorCSV, "26.7.0", map[string]any{"alm-examples": testAlmExample})),
		testPackage("nfd", "redhat-operators", "stable", testChannel("stable", "nfd.4.19.0-202601051012", "4.19.0-202601051012", map[string]any{})),
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, append(base, objs...)...)
	cs := fake.NewClientset()
	startStandIn(t, func(ctx context.Context, logf func(string, ...any)) error {
		return runOLMStandIn(ctx, cs, dyn, nil, logf)
	})
	return cs, dyn
}

func getTestObject(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	return dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// statusCondition returns the condition of type typ in obj's status.conditions, or nil.
func statusCondition(obj *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// onlyPlan returns the one InstallPlan in ns.
func onlyPlan(ctx context.Context, dyn dynamic.Interface, ns string) (*unstructured.Unstructured, string, error) {
	list, err := dyn.Resource(olmInstallPlansGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, "", err
	}
	if len(list.Items) != 1 {
		return nil, fmt.Sprintf("%d InstallPlans", len(list.Items)), nil
	}
	return &list.Items[0], "", nil
}

func setDeploymentAvailable(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// As the deployment controller reports a finished rollout: it has seen the spec, every replica is
	// updated, ready and available.
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}
	if _, err := cs.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// expectGPUOperatorInstalled checks what installing the CSV must produce: the CSV with the catalog's
// alm-examples, and the operator Deployment that the sandbox's operator follower recognises.
func expectGPUOperatorInstalled(t *testing.T, cs kubernetes.Interface, dyn dynamic.Interface) {
	t.Helper()
	eventuallyOK(t, "the CSV is created with alm-examples", func(ctx context.Context) (string, error) {
		csv, err := getTestObject(ctx, dyn, olmCSVsGVR, gpuOperatorNS, gpuOperatorCSV)
		if err != nil {
			return "", err
		}
		if got := csv.GetAnnotations()["alm-examples"]; got != testAlmExample {
			return "alm-examples = " + got, nil
		}
		if got := olmField(csv.Object, "spec", "version"); got != "26.7.0" {
			return "spec.version = " + got, nil
		}
		return "", nil
	})
	eventuallyOK(t, "the operator Deployment, its service account and RBAC exist", func(ctx context.Context) (string, error) {
		d, err := cs.AppsV1().Deployments(gpuOperatorNS).Get(ctx, "gpu-operator", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		pod := d.Spec.Template.Spec
		switch {
		case !isGPUOperatorDeployment(d):
			return "the operator follower would not recognise the Deployment", nil
		case d.Spec.Template.Labels["app"] != "gpu-operator":
			return fmt.Sprintf("pod labels %v", d.Spec.Template.Labels), nil
		case pod.ServiceAccountName != "gpu-operator":
			return "service account " + pod.ServiceAccountName, nil
		case pod.Containers[0].Image != "nvcr.io/nvidia/gpu-operator:v26.7.0":
			return "image " + pod.Containers[0].Image, nil
		case len(d.OwnerReferences) != 1 || d.OwnerReferences[0].Kind != olmKindCSV || d.OwnerReferences[0].Name != gpuOperatorCSV:
			return fmt.Sprintf("owner references %v", d.OwnerReferences), nil
		case !slices.ContainsFunc(pod.Tolerations, func(t corev1.Toleration) bool { return t.Operator == corev1.TolerationOpExists && t.Key == "" }):
			return fmt.Sprintf("tolerations %v", pod.Tolerations), nil
		}
		if _, err := cs.CoreV1().ServiceAccounts(gpuOperatorNS).Get(ctx, "gpu-operator", metav1.GetOptions{}); err != nil {
			return "", err
		}
		crb, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, gpuOperatorCSV+"-gpu-operator", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if crb.Subjects[0].Name != "gpu-operator" || crb.Subjects[0].Namespace != gpuOperatorNS {
			return fmt.Sprintf("binding subjects %v", crb.Subjects), nil
		}
		_, err = cs.RbacV1().ClusterRoles().Get(ctx, gpuOperatorCSV+"-gpu-operator", metav1.GetOptions{})
		return "", err
	})
}

func TestOLMStandInInstallsAnAutomaticSubscription(t *testing.T) {
	cs, dyn := olmFixture(t,
		testOperatorGroup(gpuOperatorNS, gpuOperatorNS),
		testSubscription(gpuOperatorNS, "gpu-operator-certified", "gpu-operator-certified", "certified-operators", "Automatic", map[string]any{"channel": "v26.7"}))
	ctx := context.Background()

	eventuallyOK(t, "the InstallPlan completes", func(ctx context.Context) (string, error) {
		plan, p, err := onlyPlan(ctx, dyn, gpuOperatorNS)
		if p != "" || err != nil {
			return p, err
		}
		names, _, _ := unstructured.NestedStringSlice(plan.Object, "spec", "clusterServiceVersionNames")
		approved, _, _ := unstructured.NestedBool(plan.Object, "spec", "approved")
		if phase := olmField(plan.Object, "status", "phase"); phase != "Complete" || !approved || !slices.Equal(names, []string{gpuOperatorCSV}) || !strings.HasPrefix(plan.GetName(), "install-") {
			return fmt.Sprintf("plan %s phase %q approved %v csvs %v", plan.GetName(), phase, approved, names), nil
		}
		return "", nil
	})
	expectGPUOperatorInstalled(t, cs, dyn)
	eventuallyOK(t, "the CSV waits for its Deployment", func(ctx context.Context) (string, error) {
		csv, err := getTestObject(ctx, dyn, olmCSVsGVR, gpuOperatorNS, gpuOperatorCSV)
		if err != nil {
			return "", err
		}
		if phase := olmField(csv.Object, "status", "phase"); phase != "Installing" {
			return "phase " + phase, nil
		}
		if csv.GetAnnotations()["olm.targetNamespaces"] != gpuOperatorNS {
			return fmt.Sprintf("annotations %v", csv.GetAnnotations()), nil
		}
		return "", nil
	})

	setDeploymentAvailable(t, cs, gpuOperatorNS, "gpu-operator")
	eventuallyOK(t, "the CSV succeeds", func(ctx context.Context) (string, error) {
		csv, err := getTestObject(ctx, dyn, olmCSVsGVR, gpuOperatorNS, gpuOperatorCSV)
		if err != nil {
			return "", err
		}
		if phase, reason := olmField(csv.Object, "status", "phase"), olmField(csv.Object, "status", "reason"); phase != "Succeeded" || reason != "InstallSucceeded" {
			return fmt.Sprintf("phase %s reason %s", phase, reason), nil
		}
		return "", nil
	})
	eventuallyOK(t, "the Subscription is at the latest known CSV", func(ctx context.Context) (string, error) {
		sub, err := getTestObject(ctx, dyn, olmSubscriptionsGVR, gpuOperatorNS, "gpu-operator-certified")
		if err != nil {
			return "", err
		}
		plan, _, _ := onlyPlan(ctx, dyn, gpuOperatorNS)
		st := sub.Object
		switch {
		case olmField(st, "status", "state") != "AtLatestKnown":
			return "state " + olmField(st, "status", "state"), nil
		case olmField(st, "status", "installedCSV") != gpuOperatorCSV || olmField(st, "status", "currentCSV") != gpuOperatorCSV:
			return fmt.Sprintf("installedCSV %q currentCSV %q", olmField(st, "status", "installedCSV"), olmField(st, "status", "currentCSV")), nil
		case plan == nil || olmField(st, "status", "installPlanRef", "name") != plan.GetName():
			return "installPlanRef " + olmField(st, "status", "installPlanRef", "name"), nil
		case statusCondition(sub, "CatalogSourcesUnhealthy")["status"] != "False":
			return fmt.Sprintf("CatalogSourcesUnhealthy %v", statusCondition(sub, "CatalogSourcesUnhealthy")), nil
		case statusCondition(sub, "InstallPlanPending") != nil:
			return "InstallPlanPending still set", nil
		}
		return "", nil
	})
	eventuallyOK(t, "the OperatorGroup reports its namespaces", func(ctx context.Context) (string, error) {
		og, err := getTestObject(ctx, dyn, olmOperatorGroupsGVR, gpuOperatorNS, gpuOperatorNS+"-group")
		if err != nil {
			return "", err
		}
		if ns, _, _ := unstructured.NestedStringSlice(og.Object, "status", "namespaces"); !slices.Equal(ns, []string{gpuOperatorNS}) {
			return fmt.Sprintf("status.namespaces %v", ns), nil
		}
		return "", nil
	})

	// Deleting the CSV while the Subscription exists makes OLM install it again, through a new plan.
	if err := dyn.Resource(olmCSVsGVR).Namespace(gpuOperatorNS).Delete(ctx, gpuOperatorCSV, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyOK(t, "a second InstallPlan reinstalls the CSV", func(ctx context.Context) (string, error) {
		plans, err := dyn.Resource(olmInstallPlansGVR).Namespace(gpuOperatorNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		if len(plans.Items) != 2 {
			return fmt.Sprintf("%d InstallPlans", len(plans.Items)), nil
		}
		csv, err := getTestObject(ctx, dyn, olmCSVsGVR, gpuOperatorNS, gpuOperatorCSV)
		if err != nil {
			return "", err
		}
		if phase := olmField(csv.Object, "status", "phase"); phase != "Succeeded" {
			return "phase " + phase, nil
		}
		return "", nil
	})

	// Deleting the Subscription leaves the operator installed, as in OLM.
	if err := dyn.Resource(olmSubscriptionsGVR).Namespace(gpuOperatorNS).Delete(ctx, "gpu-operator-certified", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	consistentlyOK(t, "the CSV outlives its Subscription", 300*time.Millisecond, func(ctx context.Context) (string, error) {
		_, err := getTestObject(ctx, dyn, olmCSVsGVR, gpuOperatorNS, gpuOperatorCSV)
		return "", err
	})
	// Deleting the CSV removes its cluster-scoped RBAC (the garbage collector, absent from fakes,
	// takes the namespaced objects).
	if err := dyn.Resource(olmCSVsGVR).Namespace(gpuOperatorNS).Delete(ctx, gpuOperatorCSV, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyOK(t, "the CSV's ClusterRole and binding are deleted", func(ctx context.Context) (string, error) {
		if _, err := cs.RbacV1().ClusterRoles().Get(ctx, gpuOperatorCSV+"-gpu-operator", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("cluster role: %v", err), nil
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, gpuOperatorCSV+"-gpu-operator", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("cluster role binding: %v", err), nil
		}
		return "", nil
	})
}

func TestOLMStandInWaitsForManualApproval(t *testing.T) {
	cs, dyn := olmFixture(t,
		testOperatorGroup(gpuOperatorNS, gpuOperatorNS),
		testSubscription(gpuOperatorNS, "gpu-operator-certified", "gpu-operator-certified", "certified-operators", "Manual",
			map[string]any{"channel": "v26.7", "startingCSV": gpuOperatorCSV}))
	ctx := context.Background()

	var planName string
	eventuallyOK(t, "the InstallPlan requires approval", func(ctx context.Context) (string, error) {
		plan, p, err := onlyPlan(ctx, dyn, gpuOperatorNS)
		if p != "" || err != nil {
			return p, err
		}
		approved, _, _ := unstructured.NestedBool(plan.Object, "spec", "approved")
		if phase := olmField(plan.Object, "status", "phase"); phase != "RequiresApproval" || approved || olmField(plan.Object, "spec", "approval") != "Manual" {
			return fmt.Sprintf("phase %q approved %v", phase, approved), nil
		}
		planName = plan.GetName()
		return "", nil
	})
	eventuallyOK(t, "the Subscription shows the pending plan", func(ctx context.Context) (string, error) {
		sub, err := getTestObject(ctx, dyn, olmSubscriptionsGVR, gpuOperatorNS, "gpu-operator-certified")
		if err != nil {
			return "", err
		}
		c := statusCondition(sub, "InstallPlanPending")
		if olmField(sub.Object, "status", "state") != "UpgradePending" || c == nil || c["reason"] != "RequiresApproval" || olmField(sub.Object, "status", "installPlanRef", "name") != planName {
			return fmt.Sprintf("status %v", sub.Object["status"]), nil
		}
		return "", nil
	})
	consistentlyOK(t, "nothing is installed before approval", 300*time.Millisecond, func(ctx context.Context) (string, error) {
		if _, err := getTestObject(ctx, dyn, olmCSVsGVR, gpuOperatorNS, gpuOperatorCSV); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("CSV: %v", err), nil
		}
		return "", nil
	})

	// What `oc patch installplan … --type merge -p '{"spec":{"approved":true}}'` does (NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst).
	if _, err := dyn.Resource(olmInstallPlansGVR).Namespace(gpuOperatorNS).Patch(ctx, planName, types.MergePatchType,
		[]byte(`{"spec":{"approved":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	expectGPUOperatorInstalled(t, cs, dyn)
	eventuallyOK(t, "the approved plan completes", func(ctx context.Context) (string, error) {
		plan, err := getTestObject(ctx, dyn, olmInstallPlansGVR, gpuOperatorNS, planName)
		if err != nil {
			return "", err
		}
		if phase := olmField(plan.Object, "status", "phase"); phase != "Complete" {
			return "phase " + phase, nil
		}
		return "", nil
	})
}

func TestOLMStandInNeedsAnOperatorGroup(t *testing.T) {
	cs, dyn := olmFixture(t,
		testSubscription(gpuOperatorNS, "gpu-operator-certified", "gpu-operator-certified", "certified-operators", "Automatic", nil))
	eventuallyOK(t, "the InstallPlan fails its install check", func(ctx context.Context) (string, error) {
		plan, p, err := onlyPlan(ctx, dyn, gpuOperatorNS)
		if p != "" || err != nil {
			return p, err
		}
		c := statusCondition(plan, "Installed")
		if olmField(plan.Object, "status", "phase") != "Installing" || c == nil || c["status"] != "False" || c["reason"] != olmInstallCheckErr || c["message"] != olmNoGroupMessage {
			return fmt.Sprintf("status %v", plan.Object["status"]), nil
		}
		return "", nil
	})
	consistentlyOK(t, "nothing is installed without an OperatorGroup", 200*time.Millisecond, func(ctx context.Context) (string, error) {
		if _, err := getTestObject(ctx, dyn, olmCSVsGVR, gpuOperatorNS, gpuOperatorCSV); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("CSV: %v", err), nil
		}
		return "", nil
	})
	createUnstructured(t, dyn, olmOperatorGroupsGVR, testOperatorGroup(gpuOperatorNS, gpuOperatorNS))
	expectGPUOperatorInstalled(t, cs, dyn)
}

func TestOLMStandInReportsResolutionFailures(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		sub                        *unstructured.Unstructured
		catalogUnhealthy, contains string
	}{
		{
			name:             "a package missing from the catalog",
			sub:              testSubscription(gpuOperatorNS, "s", "no-such-operator", "certified-operators", "Automatic", nil),
			catalogUnhealthy: "False",
			contains:         "no operators found in package no-such-operator",
		},
		{
			name:             "a catalog that does not exist",
			sub:              testSubscription(gpuOperatorNS, "s", "gpu-operator-certified", "missing-catalog", "Automatic", nil),
			catalogUnhealthy: "True",
			contains:         "no operators found from catalog missing-catalog",
		},
		{
			name:             "a channel the package does not have",
			sub:              testSubscription(gpuOperatorNS, "s", "gpu-operator-certified", "certified-operators", "Automatic", map[string]any{"channel": "v99.1"}),
			catalogUnhealthy: "False",
			contains:         "no operators found in channel v99.1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, dyn := olmFixture(t, testOperatorGroup(gpuOperatorNS, gpuOperatorNS), tc.sub)
			eventuallyOK(t, "the Subscription reports the failure", func(ctx context.Context) (string, error) {
				sub, err := getTestObject(ctx, dyn, olmSubscriptionsGVR, gpuOperatorNS, "s")
				if err != nil {
					return "", err
				}
				rf, cu := statusCondition(sub, "ResolutionFailed"), statusCondition(sub, "CatalogSourcesUnhealthy")
				if rf == nil || cu == nil || rf["status"] != "True" || rf["reason"] != "ConstraintsNotSatisfiable" ||
					!strings.Contains(fmt.Sprint(rf["message"]), tc.contains) || cu["status"] != tc.catalogUnhealthy {
					return fmt.Sprintf("conditions %v", sub.Object["status"]), nil
				}
				return "", nil
			})
			if _, p, _ := onlyPlan(context.Background(), dyn, gpuOperatorNS); p != "0 InstallPlans" {
				t.Errorf("want no InstallPlan, got %s", p)
			}
		})
	}
}

func TestOLMStandInDeploysNFDForANodeFeatureDiscovery(t *testing.T) {
	const nfdNS = "openshift-nfd"
	const operandImage = "registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:v4.19"
	const conf = "sources:\n  pci:\n    deviceLabelFields: [\"vendor\"]\n"
	cs, dyn := olmFixture(t,
		testOperatorGroup(nfdNS, nfdNS),
		testSubscription(nfdNS, "nfd", "nfd", "redhat-operators", "Automatic", map[string]any{"channel": "stable"}))
	ctx := context.Background()
	nfd := testObject(nfdOpenShiftAPI, nfdKindOpenShift, nfdNS, "nfd-instance", map[string]any{"spec": map[string]any{
		"operand":      map[string]any{"image": operandImage},
		"workerConfig": map[string]any{"configData": conf},
	}})
	createUnstructured(t, dyn, nfdOpenShiftGVR, nfd)
	eventuallyOK(t, "the NFD operator is deployed", func(ctx context.Context) (string, error) {
		_, err := cs.AppsV1().Deployments(nfdNS).Get(ctx, nfdOperatorDeployment, metav1.GetOptions{})
		return "", err
	})
	consistentlyOK(t, "no operands before the operator's CSV has succeeded", 200*time.Millisecond, func(ctx context.Context) (string, error) {
		if _, err := cs.AppsV1().DaemonSets(nfdNS).Get(ctx, "nfd-worker", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("nfd-worker: %v", err), nil
		}
		return "", nil
	})
	setDeploymentAvailable(t, cs, nfdNS, nfdOperatorDeployment)

	var ds *appsv1.DaemonSet
	eventuallyOK(t, "nfd-worker, nfd-master and the worker config exist, owned by the CR", func(ctx context.Context) (string, error) {
		var err error
		if ds, err = cs.AppsV1().DaemonSets(nfdNS).Get(ctx, "nfd-worker", metav1.GetOptions{}); err != nil {
			return "", err
		}
		spec := ds.Spec.Template.Spec
		switch {
		case !podSpecRuns(&spec, "nfd-worker"):
			return "the worker does not run nfd-worker", nil
		case spec.Containers[0].Image != operandImage:
			return "image " + spec.Containers[0].Image, nil
		case len(spec.Volumes) != 1 || spec.Volumes[0].ConfigMap == nil || spec.Volumes[0].ConfigMap.Name != "nfd-worker":
			return fmt.Sprintf("volumes %v", spec.Volumes), nil
		case len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists || spec.Tolerations[0].Key != "":
			return fmt.Sprintf("tolerations %v", spec.Tolerations), nil
		case len(ds.OwnerReferences) != 1 || ds.OwnerReferences[0].Kind != nfdKindOpenShift || ds.OwnerReferences[0].Name != "nfd-instance":
			return fmt.Sprintf("owner references %v", ds.OwnerReferences), nil
		}
		master, err := cs.AppsV1().Deployments(nfdNS).Get(ctx, "nfd-master", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if !podSpecRuns(&master.Spec.Template.Spec, "nfd-master") || len(master.OwnerReferences) != 1 {
			return "nfd-master does not run nfd-master or is not owned", nil
		}
		cm, err := cs.CoreV1().ConfigMaps(nfdNS).Get(ctx, "nfd-worker", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if cm.Data["nfd-worker.conf"] != conf {
			return fmt.Sprintf("config %q", cm.Data["nfd-worker.conf"]), nil
		}
		return "", nil
	})

	// The DaemonSet controller and kwok would now run the pods; the NFD stand-in labels the node from
	// them with the CR's deviceLabelFields.
	createTyped(t, cs.CoreV1().Nodes().Create, standInNode("gpu-0", testKernel, nil))
	worker := standInPod(nfdNS, "nfd-worker-8xq4z", "gpu-0", true, ds.Spec.Template.Spec.Containers...)
	worker.Spec.Volumes = ds.Spec.Template.Spec.Volumes
	createTyped(t, cs.CoreV1().Pods(nfdNS).Create, worker)
	createTyped(t, cs.CoreV1().Pods(nfdNS).Create, standInPod(nfdNS, "nfd-master-6f9c8", "cp-0", true, corev1.Container{Name: "nfd-master", Image: operandImage, Command: []string{"nfd-master"}}))
	startStandIn(t, func(ctx context.Context, logf func(string, ...any)) error {
		return runNFDStandIn(ctx, cs, map[string]Hardware{"gpu-0": testGPUHardware}, logf)
	})
	eventuallyOK(t, "the node gets pci-10de.present", func(ctx context.Context) (string, error) {
		n, err := getTestNode(ctx, cs, "gpu-0")
		if err != nil {
			return "", err
		}
		if n.Labels[pciVendorLabel] != "true" || n.Labels[pciClassVendorLabel] != "" {
			return fmt.Sprintf("labels %v", n.Labels), nil
		}
		return "", nil
	})

	ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 1, CurrentNumberScheduled: 1, NumberReady: 1, NumberAvailable: 1}
	if _, err := cs.AppsV1().DaemonSets(nfdNS).UpdateStatus(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	setDeploymentAvailable(t, cs, nfdNS, "nfd-master")
	eventuallyOK(t, "the NodeFeatureDiscovery is Available", func(ctx context.Context) (string, error) {
		cr, err := getTestObject(ctx, dyn, nfdOpenShiftGVR, nfdNS, "nfd-instance")
		if err != nil {
			return "", err
		}
		if c := statusCondition(cr, "Available"); c == nil || c["status"] != "True" {
			return fmt.Sprintf("Available %v", c), nil
		}
		return "", nil
	})
}
