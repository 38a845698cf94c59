package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
)

// draKubeletPluginApp is the app label of the DRA driver's kubelet plugin pods, which the GPUCluster
// deploys (NVIDIA/gpu-operator manifests/state-dra-driver/0500_daemonset.yaml@v26.7.0).
const draKubeletPluginApp = "nvidia-dra-driver-kubelet-plugin"

// isDRA decides whether the stack is the DRA one: the record says so (--dra), or, without a current
// record, the GPUCluster gpu-cluster exists.
func (s *Status) isDRA(ctx context.Context, rec *record.Record) (bool, error) {
	if rec != nil && !rec.Uninstalled {
		return rec.Inputs.DRA, nil
	}
	gc, err := s.readGPUCluster(ctx)
	return gc != nil, err
}

// readDRA reads the GPUCluster and the DRA driver's ResourceSlices.
func (s *Status) readDRA(ctx context.Context, in *statusInputs) error {
	var err error
	if in.gpuCluster, err = s.readGPUCluster(ctx); err != nil {
		return err
	}
	list, err := s.Clients.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + plan.DRADriverName})
	if err != nil && !kube.Absent(err) {
		return fmt.Errorf("list ResourceSlices of %s: %w", plan.DRADriverName, err)
	}
	if list != nil {
		in.slices = list.Items
	}
	return nil
}

// readGPUCluster reads the GPUCluster; nil when there is none or its CRD is not served.
func (s *Status) readGPUCluster(ctx context.Context) (*unstructured.Unstructured, error) {
	gc, err := s.Clients.Dynamic.Resource(health.GPUClusterResource()).Get(ctx, plan.GPUClusterName, metav1.GetOptions{})
	switch {
	case err == nil:
		return gc, nil
	case kube.Absent(err):
		return nil, nil
	}
	return nil, fmt.Errorf("read GPUCluster %s: %w", plan.GPUClusterName, err)
}

// gpuClusterCheck: the GPUCluster (nil: not found) is ready as install's wait means it
// (health.GPUClusterStatus.Ready).
func gpuClusterCheck(gc *unstructured.Unstructured) StatusCheck {
	c := StatusCheck{Name: "gpucluster", State: CheckFailed}
	if gc == nil {
		c.Message, c.Hint = "GPUCluster "+plan.GPUClusterName+" not found", "run gpuctl install --dra again"
		return c
	}
	st := health.ReadGPUClusterStatus(gc)
	c.Message = "GPUCluster " + plan.GPUClusterName + " " + st.Describe()
	if st.Ready() {
		c.State = CheckOK
	} else {
		c.Hint = "kubectl get gpucluster " + plan.GPUClusterName + " -o yaml shows the operator's conditions"
	}
	return c
}

// addDRANodeState fills each GPU node's DRA driver pod state and what it publishes.
func addDRANodeState(nodes []NodeStatus, pods []corev1.Pod, items []resourcev1.ResourceSlice) {
	perNode, devices := health.ResourceSliceCounts(items, plan.DRADriverName)
	state := map[string]string{}
	for i := range pods {
		if pods[i].Labels["app"] == draKubeletPluginApp {
			state[pods[i].Spec.NodeName] = podPhase(&pods[i])
		}
	}
	for i := range nodes {
		n := &nodes[i]
		n.DRADriver, n.ResourceSlices, n.Devices = "-", perNode[n.Name], devices[n.Name]
		if s, ok := state[n.Name]; ok {
			n.DRADriver = s
		}
	}
}

// resourceSlicesCheck: every GPU node publishes a ResourceSlice of the DRA driver, from which the
// scheduler allocates GPU claims.
func resourceSlicesCheck(nodes []NodeStatus, ns string) StatusCheck {
	var missing []string
	for _, n := range nodes {
		if n.ResourceSlices == 0 {
			missing = append(missing, n.Name)
		}
	}
	c := StatusCheck{Name: "resourceslices", State: CheckOK,
		Message: fmt.Sprintf("%s ResourceSlices on %d/%d GPU nodes", plan.DRADriverName, len(nodes)-len(missing), len(nodes))}
	if len(missing) > 0 {
		slices.Sort(missing)
		c.State = CheckFailed
		c.Message += "; not: " + strings.Join(missing, ", ")
		c.Hint = "the DRA driver's kubelet plugin publishes them: kubectl -n " + ns + " get pods -l app=" + draKubeletPluginApp + " -o wide"
	}
	return c
}
