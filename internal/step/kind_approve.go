package step

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// approveKind approves the InstallPlan of a Manual OLM Subscription for the CSV its channel names.
type approveKind struct{}

// Do approves exactly the InstallPlan that installs the CSV the Subscription's channel names,
// as NVIDIA's OpenShift guide does by hand; any other plan stays unapproved.
func (approveKind) Do(ctx context.Context, x *executor, s *plan.Step, progress func(health.Progress)) (runner.Outcome, error) {
	ns, sub := splitTarget(s.Target)
	subObj, err := x.clients.Dynamic.Resource(kube.SubscriptionsGVR).Namespace(ns).Get(ctx, sub, metav1.GetOptions{})
	if err != nil {
		return runner.Outcome{}, err
	}
	spec, _, _ := unstructured.NestedStringMap(subObj.Object, "spec")
	want := spec["startingCSV"]
	if want == "" {
		if _, want, err = x.channelHead(ctx, spec["source"], spec["name"], spec["channel"]); err != nil {
			return runner.Outcome{}, err
		}
	}
	if installed, _, _ := unstructured.NestedString(subObj.Object, "status", "installedCSV"); installed == want {
		return runner.Outcome{Skipped: true, Message: want + " is installed"}, nil
	}
	if spec["installPlanApproval"] != "Manual" {
		return runner.Outcome{Skipped: true, Message: "Automatic approval"}, nil
	}
	progress(health.Progress{Message: "waiting for OLM's InstallPlan for " + want})
	ips := x.clients.Dynamic.Resource(kube.InstallPlansGVR).Namespace(ns)
	var planName string
	_, err = watchtools.UntilWithSync(ctx, &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return ips.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return ips.Watch(ctx, o)
		},
	}, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok || ev.Type == watch.Deleted {
			return false, nil
		}
		names, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "clusterServiceVersionNames")
		if slices.Contains(names, want) {
			planName = u.GetName()
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return runner.Outcome{}, fmt.Errorf("no InstallPlan for %s appeared: %w", want, err)
	}
	patch := []byte(`{"spec":{"approved":true}}`)
	if _, err := ips.Patch(ctx, planName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: kube.FieldManager}); err != nil {
		return runner.Outcome{}, fmt.Errorf("approve InstallPlan %s: %w", planName, err)
	}
	return runner.Outcome{Message: "approved InstallPlan " + planName + " for " + want, Changed: true}, nil
}

// Writes: a rule, as the InstallPlan is OLM's to make at run time and is approved only under Manual
// approval.
func (approveKind) Writes(_ context.Context, l *lister, s *plan.Step) error {
	l.w.Rules = append(l.w.Rules, "approves the InstallPlan OLM creates for "+s.Target+" (its name is known only then), where the Subscription asks for Manual approval")
	return nil
}

// State: an approval is one patch; whether it landed is the InstallPlan's to say.
func (approveKind) State(context.Context, *executor, *plan.Step) (string, error) { return "", nil }

func (approveKind) Explained() bool { return false }

// Needs: the Subscription and the catalog are read, the InstallPlans watched and one patched.
func (approveKind) Needs(s *plan.Step, _ string) []preflight.Access {
	ns, _ := splitTarget(s.Target)
	out := access(ns, kube.SubscriptionsGVR.Group, kube.SubscriptionsGVR.Resource, "get")
	out = append(out, access(ns, kube.PackageManifestGVR.Group, kube.PackageManifestGVR.Resource, "get")...)
	return append(out, access(ns, kube.InstallPlansGVR.Group, kube.InstallPlansGVR.Resource, "list", "watch", "patch")...)
}

func (approveKind) Recorded(*plan.Step) (Recorded, error) { return Recorded{}, nil }
func (approveKind) Rendered(*plan.Step) Rendered          { return Rendered{} }
func (approveKind) Exported(*plan.Step) Exported          { return Exported{} }
