package engine

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
)

// allocatable is a GPU node advertising the given extended resources ("nvidia.com/gpu": "0", …).
func allocatable(name string, res map[string]string) *corev1.Node {
	n := gpuNode(name, nil)
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
	for r, q := range res {
		n.Status.Allocatable[corev1.ResourceName(r)] = resource.MustParse(q)
	}
	return n
}

func TestVerifyRequest(t *testing.T) {
	gpu := plan.VerifyRequest{Resource: plan.VerifyGPUResource}
	claim := plan.VerifyRequest{DeviceClass: plan.DRADriverName}
	for _, tc := range []struct {
		name   string
		node   *corev1.Node
		dra    bool
		slices bool
		want   plan.VerifyRequest
	}{
		{"whole GPUs: one nvidia.com/gpu", allocatable("n", map[string]string{"nvidia.com/gpu": "8"}), false, false, gpu},
		{"time-slicing replicas (renameByDefault false) are nvidia.com/gpu too", allocatable("n", map[string]string{"nvidia.com/gpu": "32"}), false, false, gpu},
		{"mixed MIG: the smallest profile the node advertises",
			allocatable("n", map[string]string{"nvidia.com/gpu": "0", "nvidia.com/mig-3g.20gb": "2", "nvidia.com/mig-1g.10gb": "1", "nvidia.com/mig-1g.5gb": "7"}), false, false,
			plan.VerifyRequest{Resource: "nvidia.com/mig-1g.5gb"}},
		{"mixed MIG: a profile with none allocatable is passed over",
			allocatable("n", map[string]string{"nvidia.com/mig-1g.5gb": "0", "nvidia.com/mig-2g.10gb": "3"}), false, false,
			plan.VerifyRequest{Resource: "nvidia.com/mig-2g.10gb"}},
		{"mixed MIG: fewer compute slices before less memory, then by name",
			allocatable("n", map[string]string{"nvidia.com/mig-2g.10gb": "1", "nvidia.com/mig-1g.10gb+me": "1", "nvidia.com/mig-1g.10gb": "1"}), false, false,
			plan.VerifyRequest{Resource: "nvidia.com/mig-1g.10gb"}},
		{"nvidia.com/gpu before MIG resources, as under the single strategy",
			allocatable("n", map[string]string{"nvidia.com/gpu": "7", "nvidia.com/mig-1g.5gb": "7"}), false, false, gpu},
		{"the install record's DRA: a claim, whatever the node still shows", allocatable("n", map[string]string{"nvidia.com/gpu": "2"}), true, false, claim},
		{"no GPU resource, the DRA driver publishes the node's devices: a claim", allocatable("n", nil), false, true, claim},
		{"no GPU resource and no slices: nvidia.com/gpu, so the scheduler says why", allocatable("n", map[string]string{"nvidia.com/gpu": "0"}), false, false, gpu},
		{"a node without status yet: nvidia.com/gpu", gpuNode("n", nil), false, false, gpu},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := verifyRequest(tc.node, tc.dra, tc.slices); got != tc.want {
				t.Errorf("request %+v, want %+v", got, tc.want)
			}
		})
	}
}

// One run over a MIG node, a whole-GPU node and a DRA node: each pod asks for what its node offers, the
// DRA node's through a claim from the run's ResourceClaimTemplate, which the plan shows and the run
// deletes after its pods, with the one an earlier run left.
func TestVerifyModes(t *testing.T) {
	leftover := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "gpuctl-verify-ffffff", Namespace: "gpu-operator", UID: "uid-old",
		Labels: map[string]string{VerifyNameLabel: plan.VerifyName, managedByLabel: "gpuctl", VerifyRunLabel: "ffffff"}}}
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "dra-1-gpu"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: plan.DRADriverName, NodeName: ptr.To("dra-1"), Pool: resourcev1.ResourcePool{Name: "dra-1"}, Devices: []resourcev1.Device{{Name: "gpu-0"}}}}
	other := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1-other"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "other.example.com", NodeName: ptr.To("gpu-1"), Pool: resourcev1.ResourcePool{Name: "gpu-1"}, Devices: []resourcev1.Device{{Name: "x"}}}}
	objs := []runtime.Object{
		allocatable("a100-1", map[string]string{"nvidia.com/gpu": "0", "nvidia.com/mig-1g.5gb": "7"}),
		allocatable("dra-1", nil),
		allocatable("gpu-1", map[string]string{"nvidia.com/gpu": "1"}),
		leftover, slice, other,
	}
	all := map[string]kubelet{"a100-1": succeeds, "dra-1": succeeds, "gpu-1": succeeds}

	t.Run("the dry run plans the template, the pods' requests and every deletion, and writes nothing", func(t *testing.T) {
		kc := verifyCluster(t, all, objs...)
		res, err := (&Verify{Clients: &kube.Clients{Kube: kc, Namespace: "gpu-operator"}, Options: VerifyOptions{DryRun: true}}).Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		p := res.Plan
		tmpl := "gpuctl-verify-" + p.RunID
		if want := []plan.VerifyClaimTemplate{{Namespace: "gpu-operator", Name: tmpl, DeviceClass: plan.DRADriverName}}; !reflect.DeepEqual(p.ClaimTemplates, want) {
			t.Errorf("claim templates %+v, want %+v", p.ClaimTemplates, want)
		}
		if !slices.Equal(p.DeleteClaimTemplatesAtEnd, []string{tmpl}) || len(p.DeleteClaimTemplates) != 1 || p.DeleteClaimTemplates[0].UID != "uid-old" {
			t.Errorf("template deletions %+v and at the end %v", p.DeleteClaimTemplates, p.DeleteClaimTemplatesAtEnd)
		}
		got := map[string]string{}
		for _, c := range p.Create {
			got[c.Node] = c.Resource + c.ClaimTemplate
		}
		if want := map[string]string{"a100-1": "nvidia.com/mig-1g.5gb", "dra-1": tmpl, "gpu-1": "nvidia.com/gpu"}; !reflect.DeepEqual(got, want) {
			t.Errorf("requests %v, want %v", got, want)
		}
		for _, w := range writes(kc) {
			if !strings.HasPrefix(w, "create configmaps") {
				t.Errorf("the dry run wrote: %s", w)
			}
		}
	})

	t.Run("the run asks each node for its own, reports it per node, and removes its template after its pods", func(t *testing.T) {
		kc := verifyCluster(t, all, objs...)
		res, err := (&Verify{Clients: &kube.Clients{Kube: kc, Namespace: "gpu-operator"}}).Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, n := range res.Nodes {
			got[n.Node] = n.Resource + "|" + n.DeviceClass + "|" + string(n.Outcome)
		}
		want := map[string]string{"a100-1": "nvidia.com/mig-1g.5gb||passed", "dra-1": "|gpu.nvidia.com|passed", "gpu-1": "nvidia.com/gpu||passed"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("nodes %v, want %v", got, want)
		}
		tmpl := "gpuctl-verify-" + res.RunID
		var order []string
		for _, a := range kc.Actions() {
			switch a.GetVerb() + " " + a.GetResource().Resource {
			case "create pods":
				p := a.(interface{ GetObject() runtime.Object }).GetObject().(*corev1.Pod)
				order = append(order, "create pod")
				c := p.Spec.Containers[0].Resources
				switch p.Annotations[verifyNodeAnno] {
				case "dra-1":
					if len(c.Limits) != 0 || len(p.Spec.ResourceClaims) != 1 || *p.Spec.ResourceClaims[0].ResourceClaimTemplateName != tmpl ||
						len(c.Claims) != 1 || c.Claims[0].Name != p.Spec.ResourceClaims[0].Name {
						t.Errorf("dra-1's pod: claims %+v, container %+v", p.Spec.ResourceClaims, c)
					}
				case "a100-1":
					if q := c.Limits["nvidia.com/mig-1g.5gb"]; q.Value() != 1 || len(c.Limits) != 1 || len(p.Spec.ResourceClaims) != 0 {
						t.Errorf("a100-1's pod limits %v", c.Limits)
					}
				}
			case "create resourceclaimtemplates":
				ct := a.(interface{ GetObject() runtime.Object }).GetObject().(*resourcev1.ResourceClaimTemplate)
				order = append(order, "create template")
				r := ct.Spec.Spec.Devices.Requests
				if ct.Name != tmpl || ct.Labels[VerifyRunLabel] != res.RunID || len(r) != 1 || r[0].Exactly == nil ||
					r[0].Exactly.DeviceClassName != plan.DRADriverName || r[0].Exactly.Count != 1 {
					t.Errorf("template %s: labels %v, requests %+v", ct.Name, ct.Labels, r)
				}
			case "delete pods":
				order = append(order, "delete pod")
			case "delete resourceclaimtemplates":
				order = append(order, "delete template "+a.(interface{ GetName() string }).GetName())
			}
		}
		want2 := []string{"delete template gpuctl-verify-ffffff", "create template", "create pod", "create pod", "create pod",
			"delete pod", "delete pod", "delete pod", "delete template " + tmpl}
		if !slices.Equal(order, want2) {
			t.Errorf("writes %v, want %v", order, want2)
		}
		if left, err := kc.ResourceV1().ResourceClaimTemplates("gpu-operator").List(t.Context(), metav1.ListOptions{}); err != nil || len(left.Items) != 0 {
			t.Errorf("templates left: %v (%v)", left, err)
		}
		if !reflect.DeepEqual(res.Done, res.Plan) {
			t.Errorf("the run did %+v, planned %+v", res.Done, res.Plan)
		}
		if !slices.Equal(res.RemovedClaimTemplates, []string{"gpuctl-verify-ffffff", tmpl}) {
			t.Errorf("removed templates %v", res.RemovedClaimTemplates)
		}
	})

	t.Run("the install record's DRA gives every node a claim, without reading the slices", func(t *testing.T) {
		kc := verifyCluster(t, all, objs...)
		if err := record.Write(t.Context(), kc, &record.Record{Namespace: "gpu-operator", Inputs: record.Inputs{DRA: true}}); err != nil {
			t.Fatal(err)
		}
		res, err := (&Verify{Clients: &kube.Clients{Kube: kc, Namespace: "gpu-operator"}, Options: VerifyOptions{DryRun: true}}).Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Plan.Create {
			if c.ClaimTemplate == "" || c.Resource != "" {
				t.Errorf("node %s: %+v, want a claim", c.Node, c)
			}
		}
		for _, a := range kc.Actions() {
			if a.GetResource().Resource == "resourceslices" {
				t.Error("read the ResourceSlices")
			}
		}
	})
}
