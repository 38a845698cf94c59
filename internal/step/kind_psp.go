package step

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// pspKind binds VMware's privileged PodSecurityPolicy to the namespace's service accounts on clusters
// that still serve PodSecurityPolicy (removed in Kubernetes 1.25;
// https://raw.githubusercontent.com/wavefrontHQ/wavefront-collector-for-kubernetes/master/deploy/vsphere-tanzu/0-vsphere-tanzu-rolebinding.yaml):
// the GPU operator dropped PSP support in 24.3.0, so without this its privileged operands are rejected there.
type pspKind struct{}

func (pspKind) Do(ctx context.Context, x *executor, s *plan.Step, _ func(health.Progress)) (runner.Outcome, error) {
	served, err := PSPServed(x.clients)
	if err != nil {
		return runner.Outcome{}, err
	}
	if !served {
		return runner.Outcome{Skipped: true, Message: "this cluster serves no PodSecurityPolicy (removed in Kubernetes 1.25)"}, nil
	}
	return applyObjects(ctx, x.clients, []map[string]any{plan.PSPBinding(s.Target)})
}

// Writes: the RoleBinding, where the cluster serves PodSecurityPolicy (the step applies it only there).
func (pspKind) Writes(ctx context.Context, l *lister, s *plan.Step) error {
	served, err := PSPServed(l.clients)
	if err != nil || !served {
		return err
	}
	return l.objects(ctx, s.ID, []map[string]any{plan.PSPBinding(s.Target)})
}

// State says whether the binding exists.
func (pspKind) State(ctx context.Context, x *executor, s *plan.Step) (string, error) {
	return objectsState(ctx, x.clients, []map[string]any{plan.PSPBinding(s.Target)})
}

func (pspKind) Explained() bool { return false }

// Needs: the binding, and discovery (which every client may read).
func (pspKind) Needs(s *plan.Step, _ string) []preflight.Access {
	return access(s.Target, "rbac.authorization.k8s.io", "rolebindings", "get", "create", "patch")
}

func (pspKind) Recorded(s *plan.Step) (Recorded, error) {
	return Recorded{Objects: []record.Object{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding", Name: plan.PSPBindingName, Namespace: s.Target}}}, nil
}

// Rendered: nothing; whether it applies is known only from the cluster it runs on.
func (pspKind) Rendered(*plan.Step) Rendered { return Rendered{} }

// Exported: the binding, which does no harm where PodSecurityPolicy is no longer served.
func (pspKind) Exported(s *plan.Step) Exported {
	if s.Skip != "" {
		return Exported{}
	}
	return Exported{Objects: []ExportedObject{{Object: plan.PSPBinding(s.Target),
		Comment: []string{"binds the privileged PodSecurityPolicy on older TKGS; harmless where PodSecurityPolicy is no longer served (Kubernetes 1.25 and newer)"}}}}
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
