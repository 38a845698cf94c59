package runner

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gpuctl/gpuctl/internal/plan"
)

// psp binds VMware's privileged PodSecurityPolicy to the namespace's service accounts on clusters
// that still serve PodSecurityPolicy (removed in Kubernetes 1.25;
// https://raw.githubusercontent.com/wavefrontHQ/wavefront-collector-for-kubernetes/master/deploy/vsphere-tanzu/0-vsphere-tanzu-rolebinding.yaml):
// the GPU operator dropped PSP support in 24.3.0, so without this its privileged operands are rejected there.
func (x *executor) psp(ctx context.Context, s *plan.Step) (Outcome, error) {
	// Ask for the group version only if the server lists it: discovery clients differ in the error
	// they return for a version that is not served.
	groups, err := x.clients.Discovery.ServerGroups()
	if err != nil {
		return Outcome{}, err
	}
	served := false
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			if v.GroupVersion == "policy/v1beta1" {
				res, err := x.clients.Discovery.ServerResourcesForGroupVersion(v.GroupVersion)
				if err != nil && !apierrors.IsNotFound(err) {
					return Outcome{}, err
				}
				for i := 0; res != nil && i < len(res.APIResources); i++ {
					served = served || res.APIResources[i].Name == "podsecuritypolicies"
				}
			}
		}
	}
	if !served {
		return Outcome{Skipped: true, Message: "this cluster serves no PodSecurityPolicy (removed in Kubernetes 1.25)"}, nil
	}
	ns := s.Target
	binding := map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": plan.PSPBindingName, "namespace": ns},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "psp:vmware-system-privileged"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:serviceaccounts:" + ns}},
	}
	return x.objects(ctx, &plan.Step{Objects: []map[string]any{binding}})
}
