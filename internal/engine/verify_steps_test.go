package engine

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuctl/gpuctl/internal/kube"
)

// What a run reports it created is what the API server returned on create: an admission policy that
// rewrites the image to a mirror and binds the pod itself shows in Done and in the pod's verdict, while
// the plan stays as planned.
func TestVerifyReportsThePodsTheAPIServerCreated(t *testing.T) {
	const mirror = "mirror.example/cuda-sample:vectoradd"
	kc := verifyCluster(t, map[string]kubelet{"gpu-1": succeeds, "gpu-2": succeeds}, gpuNode("gpu-1", nil), gpuNode("gpu-2", nil))
	kc.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		p.Spec.Containers[0].Image = mirror
		if p.Annotations[verifyNodeAnno] == "gpu-2" {
			p.Annotations[verifyNodeAnno] = "gpu-1"
		}
		return false, nil, nil
	})
	res, err := (&Verify{Clients: &kube.Clients{Kube: kc, Namespace: "gpu-operator"}}).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p := res.Plan
	if len(res.Done.Create) != len(p.Create) {
		t.Fatalf("the run created %+v, planned %+v", res.Done.Create, p.Create)
	}
	for i, got := range res.Done.Create {
		planned := p.Create[i]
		if planned.Image == mirror || got.Image != mirror {
			t.Errorf("pod %s: the run reports image %q (planned %q), the API server created %q", got.Name, got.Image, planned.Image, mirror)
		}
		if got.Name != planned.Name || got.Namespace != planned.Namespace || got.Resource != planned.Resource {
			t.Errorf("the run reports %+v, planned %+v", got, planned)
		}
	}
	// The fake kubelet binds each pod to the node of its annotation, which the policy above moved.
	if got := res.Done.Create[1].Node; got != "gpu-1" || p.Create[1].Node != "gpu-2" {
		t.Errorf("the run reports pod %s on %q (planned %q), the API server bound it to gpu-1", res.Done.Create[1].Name, got, p.Create[1].Node)
	}
	for _, nv := range res.Nodes {
		if nv.Pod == res.Done.Create[1].Name && nv.Node != "gpu-1" {
			t.Errorf("the verdict of pod %s names node %s, the API server bound it to gpu-1", nv.Pod, nv.Node)
		}
	}
}
