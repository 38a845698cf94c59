package step

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// psp binds VMware's privileged PodSecurityPolicy to the namespace's service accounts on clusters
// that still serve PodSecurityPolicy (removed in Kubernetes 1.25;
// https://raw.githubusercontent.com/wavefrontHQ/wavefront-collector-for-kubernetes/master/deploy/vsphere-tanzu/0-vsphere-tanzu-rolebinding.yaml):
// the GPU operator dropped PSP support in 24.3.0, so without this its privileged operands are rejected there.
func (x *executor) psp(ctx context.Context, s *plan.Step) (runner.Outcome, error) {
	served, err := PSPServed(x.clients)
	if err != nil {
		return runner.Outcome{}, err
	}
	if !served {
		return runner.Outcome{Skipped: true, Message: "this cluster serves no PodSecurityPolicy (removed in Kubernetes 1.25)"}, nil
	}
	return x.objects(ctx, &plan.Step{Objects: []map[string]any{plan.PSPBinding(s.Target)}})
}

// PSPServed reports whether the cluster serves policy/v1beta1 podsecuritypolicies. It asks for the
// group version only if the server lists it: discovery clients differ in the error they return for a
// version that is not served.
func PSPServed(clients *kube.Clients) (bool, error) {
	groups, err := clients.Discovery.ServerGroups()
	if err != nil {
		return false, err
	}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			if v.GroupVersion != "policy/v1beta1" {
				continue
			}
			res, err := clients.Discovery.ServerResourcesForGroupVersion(v.GroupVersion)
			if err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
			if res != nil && slices.ContainsFunc(res.APIResources, func(r metav1.APIResource) bool { return r.Name == "podsecuritypolicies" }) {
				return true, nil
			}
		}
	}
	return false, nil
}
