package engine

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/plan"
)

// migResourcePrefix starts the extended resources NVIDIA's device plugin advertises per MIG profile
// under the mixed strategy (nvidia.com/mig-1g.5gb, …; k8s-device-plugin's docs, "MIG support").
const migResourcePrefix = "nvidia.com/mig-"

// migProfile reads the compute slices and memory of a MIG resource's profile (mig-1g.5gb: 1, 5).
var migProfile = regexp.MustCompile(`^nvidia\.com/mig-(\d+)g\.(\d+)gb`)

// verifyRequest chooses what a node's pod asks for, from what the node offers: one nvidia.com/gpu where
// it advertises some (whole GPUs, MIG's single strategy, time-slicing or MPS replicas); else, under
// MIG's mixed strategy, one of the smallest MIG profile it advertises (fewest compute slices, then
// least memory, then by name: the same choice every run); else, when gpuctl installed the DRA stack
// (dra) or NVIDIA's DRA driver publishes devices of the node (slices), a ResourceClaim on the driver's
// DeviceClass; else nvidia.com/gpu all the same, so the scheduler says why the pod does not fit.
func verifyRequest(n *corev1.Node, dra, slices bool) plan.VerifyRequest {
	if dra {
		return plan.VerifyRequest{DeviceClass: plan.DRADriverName}
	}
	if q, ok := n.Status.Allocatable[plan.VerifyGPUResource]; ok && q.Sign() > 0 {
		return plan.VerifyRequest{Resource: plan.VerifyGPUResource}
	}
	if mig := smallestMIG(n.Status.Allocatable); mig != "" {
		return plan.VerifyRequest{Resource: mig}
	}
	if slices {
		return plan.VerifyRequest{DeviceClass: plan.DRADriverName}
	}
	return plan.VerifyRequest{Resource: plan.VerifyGPUResource}
}

// smallestMIG is the smallest MIG profile's resource of which the node has one free, "" when none.
func smallestMIG(alloc corev1.ResourceList) string {
	var names []string
	for r, q := range alloc {
		if strings.HasPrefix(string(r), migResourcePrefix) && q.Sign() > 0 {
			names = append(names, string(r))
		}
	}
	size := func(r string) (int, int) {
		m := migProfile.FindStringSubmatch(r)
		if m == nil {
			return 1 << 30, 1 << 30
		}
		g, _ := strconv.Atoi(m[1])
		mem, _ := strconv.Atoi(m[2])
		return g, mem
	}
	slices.SortFunc(names, func(a, b string) int {
		ga, ma := size(a)
		gb, mb := size(b)
		if ga != gb {
			return ga - gb
		}
		if ma != mb {
			return ma - mb
		}
		return strings.Compare(a, b)
	})
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// needsSlices: a node offers neither nvidia.com/gpu nor a MIG resource, so whether NVIDIA's DRA driver
// publishes its devices decides its request.
func needsSlices(n *corev1.Node) bool {
	q := n.Status.Allocatable[plan.VerifyGPUResource]
	return q.Sign() <= 0 && smallestMIG(n.Status.Allocatable) == ""
}

// nodesWithSlices are the nodes of which NVIDIA's DRA driver publishes ResourceSlices with devices. A
// cluster without the resource.k8s.io/v1 API has none.
func (v *Verify) nodesWithSlices(ctx context.Context) (map[string]bool, error) {
	list, err := v.Clients.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + plan.DRADriverName})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("list the ResourceSlices of %s: %w", plan.DRADriverName, err)
	}
	out := map[string]bool{}
	for _, s := range list.Items {
		if s.Spec.Driver == plan.DRADriverName && s.Spec.NodeName != nil && len(s.Spec.Devices) > 0 {
			out[*s.Spec.NodeName] = true
		}
	}
	return out, nil
}
