package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// TestDRA: `gpuctl install --dra` on v26.7.0 installs the GPUCluster instead of the ClusterPolicy; NVIDIA's
// real controller reconciles it (its DRA kubelet plugin, whose pods the sandbox's stand-in acts for,
// publishes a ResourceSlice per GPU node); a pod whose ResourceClaim comes from a ResourceClaimTemplate
// on device class gpu.nvidia.com is allocated a GPU by the real scheduler and runs; status judges the
// GPUCluster and the slices. --dra on a release without a GPUCluster, or with the device plugin asked
// for, is refused before the first write.
func TestDRA(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1, GPUsPerNode: 2}})
	ctx := t.Context()
	dyn := dynamicClient(t, c)
	gpuNodes := simulatedGPUNodes(c)

	story(t,
		step{"refusals before the first write: a release without a GPUCluster, and the device plugin asked for", func(t *testing.T) {
			before := writableState(t, c)
			for _, tc := range []struct {
				args []string
				want string
			}{
				{[]string{"--operator-version", "v25.10.1"}, "GPU Operator v25.10.1 has no GPUCluster"},
				{[]string{"--set", "devicePlugin.enabled=true"}, "devicePlugin.enabled=true"},
			} {
				code, _, stderr := gpuctl(t, c, append([]string{"install", "--dra"}, tc.args...)...)
				if code != cli.ExitUsage {
					t.Errorf("install --dra %v exited %d, want %d", tc.args, code, cli.ExitUsage)
				}
				lines := strings.Split(strings.TrimSpace(stderr), "\n")
				if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "--dra") && strings.Contains(l, tc.want) }) {
					t.Errorf("install --dra %v: stderr does not name why (%q):\n%s", tc.args, tc.want, stderr)
				}
			}
			if _, err := c.Kube.CoreV1().Namespaces().Get(ctx, "gpu-operator", metav1.GetOptions{}); err == nil {
				t.Error("namespace gpu-operator was created")
			}
			assertUnchanged(t, before, writableState(t, c))
		}},

		step{"install --dra: the GPUCluster, no ClusterPolicy, reconciled by the real controller", func(t *testing.T) {
			res, _ := installJSON(t, c, "--dra")
			if res.Plan.Step("wait-gpucluster") == nil || res.Plan.Step("wait-clusterpolicy") != nil {
				t.Errorf("plan steps do not wait on the GPUCluster instead of the ClusterPolicy: %+v", res.Plan.Steps)
			}
			op := res.Plan.Step("release-" + plan.OperatorRelease).Release
			if !slices.ContainsFunc(op.Layers, func(l plan.Layer) bool { return l.Source == plan.DRASource }) {
				t.Errorf("operator layers %+v have no %s layer", op.Layers, plan.DRASource)
			}
			gc, err := dyn.Resource(health.GPUClusterResource()).Get(ctx, plan.GPUClusterName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if st := health.ReadGPUClusterStatus(gc); !st.Ready() {
				t.Errorf("GPUCluster %s: %s, want ready (Reconciled)", plan.GPUClusterName, st.Describe())
			}
			if _, err := dyn.Resource(health.ClusterPolicyResource()).Get(ctx, plan.ClusterPolicyName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("ClusterPolicy %s: err %v, want none next to the GPUCluster", plan.ClusterPolicyName, err)
			}
			if ds, err := c.Kube.AppsV1().DaemonSets("gpu-operator").Get(ctx, "nvidia-dra-driver-kubelet-plugin", metav1.GetOptions{}); err != nil || ds.Status.NumberReady != int32(len(gpuNodes)) {
				t.Errorf("the controller's DRA kubelet plugin DaemonSet: %v, want ready on %d nodes", err, len(gpuNodes))
			}
			list, err := c.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			perNode, devices := health.ResourceSliceCounts(list.Items, plan.DRADriverName)
			for _, n := range gpuNodes {
				if perNode[n] == 0 || devices[n] != 2 {
					t.Errorf("node %s: %d slices with %d devices of %s, want the node's 2 GPUs", n, perNode[n], devices[n], plan.DRADriverName)
				}
			}
			if _, err := c.Kube.ResourceV1().DeviceClasses().Get(ctx, plan.DRADriverName, metav1.GetOptions{}); err != nil {
				t.Errorf("DeviceClass %s: %v", plan.DRADriverName, err)
			}
		}},

		step{"a pod with a ResourceClaim from a template on gpu.nvidia.com is allocated by the real scheduler and runs", func(t *testing.T) {
			tmpl := &resourcev1.ResourceClaimTemplate{
				ObjectMeta: metav1.ObjectMeta{Name: "one-gpu", Namespace: "default"},
				Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
					Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: plan.DRADriverName}}},
				}}},
			}
			if _, err := c.Kube.ResourceV1().ResourceClaimTemplates("default").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "dra-cuda", Namespace: "default"},
				Spec: corev1.PodSpec{
					Tolerations:    []corev1.Toleration{{Key: plan.TaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}},
					Containers: []corev1.Container{{Name: "cuda", Image: "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu22.04",
						Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
				},
			}
			if _, err := c.Kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var got *corev1.Pod
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
				p, err := c.Kube.CoreV1().Pods("default").Get(ctx, "dra-cuda", metav1.GetOptions{})
				got = p
				return err == nil && p.Status.Phase == corev1.PodRunning, err
			})
			if err != nil {
				t.Fatalf("pod dra-cuda not Running: %v; status %+v", err, got.Status)
			}
			if !slices.Contains(gpuNodes, got.Spec.NodeName) {
				t.Errorf("the pod runs on %s, not a GPU node %v", got.Spec.NodeName, gpuNodes)
			}
			if len(got.Status.ResourceClaimStatuses) != 1 || got.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
				t.Fatalf("resourceClaimStatuses %+v", got.Status.ResourceClaimStatuses)
			}
			claim, err := c.Kube.ResourceV1().ResourceClaims("default").Get(ctx, *got.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if a := claim.Status.Allocation; a == nil || len(a.Devices.Results) != 1 || a.Devices.Results[0].Driver != plan.DRADriverName || a.Devices.Results[0].Pool != got.Spec.NodeName {
				t.Errorf("claim %s allocation %+v, want one %s device of node %s", claim.Name, claim.Status.Allocation, plan.DRADriverName, got.Spec.NodeName)
			}
		}},

		step{"status judges the GPUCluster and shows the DRA driver and its ResourceSlices per node", func(t *testing.T) {
			code, st := statusJSON(t, c, healthyWait()...)
			if code != 0 || !st.Healthy {
				t.Fatalf("status exit %d, healthy %v: %+v", code, st.Healthy, st.Checks)
			}
			var names []string
			for _, ch := range st.Checks {
				names = append(names, ch.Name)
			}
			if !slices.Contains(names, "gpucluster") || !slices.Contains(names, "resourceslices") || slices.Contains(names, "clusterpolicy") || slices.Contains(names, "allocatable") {
				t.Errorf("checks %v: want gpucluster and resourceslices instead of clusterpolicy and allocatable", names)
			}
			if st.Record == nil || !st.Record.Inputs.DRA {
				t.Errorf("the install record does not keep --dra: %+v", st.Record)
			}
			for _, n := range st.Nodes {
				if n.DRADriver != "Ready" || n.ResourceSlices == 0 || n.Devices != 2 {
					t.Errorf("node row %+v: want the DRA driver Ready and 2 published devices", n)
				}
			}
			code, out, _ := gpuctl(t, c, "status")
			if code != 0 || !strings.Contains(out, "RESOURCESLICES") {
				t.Errorf("status exit %d, text without the DRA columns:\n%s", code, out)
			}
		}},

		step{"verify passes, each node's pod given a GPU through a ResourceClaim on gpu.nvidia.com, and leaves nothing", func(t *testing.T) {
			code, stdout, stderr := gpuctl(t, c, "verify", "--timeout", "2m", "-o", "json")
			if code != 0 {
				t.Fatalf("verify exited %d, want 0:\n%s\n%s", code, stdout, stderr)
			}
			got := verifyRequests(t, stdout)
			for _, n := range gpuNodes {
				if want := "claim on " + plan.DRADriverName + " passed"; got[n] != want {
					t.Errorf("node %s: %q, want %q", n, got[n], want)
				}
			}
			if len(got) != len(gpuNodes) {
				t.Errorf("verified %v, want the GPU nodes %v", got, gpuNodes)
			}
			assertNoVerifyPods(t, c)
			ns := "gpu-operator"
			sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=gpuctl-verify"}
			if l, err := c.Kube.ResourceV1().ResourceClaimTemplates(ns).List(ctx, sel); err != nil || len(l.Items) > 0 {
				t.Errorf("verify left ResourceClaimTemplates: %v (%v)", l, err)
			}
			// The claims are Kubernetes' (the resourceclaim controller makes them from the template, with
			// its labels, each owned by its pod): the garbage collector deletes them after the pods. Other
			// claims in the namespace (the DRA validator's) are not verify's.
			waitUntil(t, time.Minute, "the claims of verify's pods are gone", func(ctx context.Context) (bool, error) {
				l, err := c.Kube.ResourceV1().ResourceClaims(ns).List(ctx, sel)
				return err == nil && len(l.Items) == 0, err
			})
		}},

		step{"uninstall deletes the GPUCluster gpuctl created while the operator still runs", func(t *testing.T) {
			if err := c.Kube.CoreV1().Pods("default").Delete(ctx, "dra-cuda", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
				t.Fatal(err)
			}
			code, _, stderr := uninstallJSON(t, c, "--yes")
			if code != 0 {
				t.Fatalf("uninstall exited %d:\n%s", code, stderr)
			}
			// uninstall keeps the CRDs (without --purge): the GPUCluster itself is gone.
			left, err := dyn.Resource(health.GPUClusterResource()).Get(ctx, plan.GPUClusterName, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("GPUCluster after uninstall: err %v, object %v", err, left)
			}
		}},
	)
}
