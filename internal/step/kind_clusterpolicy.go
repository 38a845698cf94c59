package step

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// clusterPolicyKind applies the ClusterPolicy from the installed CSV's alm-examples with the plan's
// overrides (OpenShift, where NVIDIA's operator comes from OLM).
type clusterPolicyKind struct{}

// Do builds the ClusterPolicy from the installed CSV's alm-examples, merges the step's
// overrides over its spec, and server-side applies it.
func (clusterPolicyKind) Do(ctx context.Context, x *executor, s *plan.Step, _ func(health.Progress)) (runner.Outcome, error) {
	// OLM has just installed the bundle's CRDs: forget the discovery gpuctl cached before.
	x.clients.Refresh()
	ns, sub := splitTarget(s.Target)
	subObj, err := x.clients.Dynamic.Resource(kube.SubscriptionsGVR).Namespace(ns).Get(ctx, sub, metav1.GetOptions{})
	if err != nil {
		return runner.Outcome{}, err
	}
	csvName, _, _ := unstructured.NestedString(subObj.Object, "status", "installedCSV")
	csv, err := x.clients.Dynamic.Resource(kube.CSVsGVR).Namespace(ns).Get(ctx, csvName, metav1.GetOptions{})
	if err != nil {
		return runner.Outcome{}, fmt.Errorf("CSV %s: %w", csvName, err)
	}
	var examples []map[string]any
	if err := json.Unmarshal([]byte(csv.GetAnnotations()["alm-examples"]), &examples); err != nil {
		return runner.Outcome{}, fmt.Errorf("CSV %s alm-examples: %w", csvName, err)
	}
	var policy map[string]any
	for _, e := range examples {
		if e["kind"] == "ClusterPolicy" {
			policy = e
			break
		}
	}
	if policy == nil {
		return runner.Outcome{}, fmt.Errorf("CSV %s has no ClusterPolicy among its alm-examples", csvName)
	}
	spec, _ := policy["spec"].(map[string]any)
	policy["spec"] = plan.MergeValues(spec, s.PolicySpec)
	policy["metadata"] = map[string]any{"name": s.PolicyName}
	delete(policy, "status")
	out, err := applyObjects(ctx, x.clients, []map[string]any{policy})
	if err != nil {
		return out, err
	}
	out.Message = "from " + csvName + "'s alm-examples: " + out.Message
	return out, nil
}

// Writes: the ClusterPolicy, built at run time from the installed CSV's alm-examples: whether it
// changes is known then.
func (clusterPolicyKind) Writes(_ context.Context, l *lister, s *plan.Step) error {
	l.w.Objects = append(l.w.Objects, plan.ObjectWrite{Step: s.ID, APIVersion: "nvidia.com/v1", Kind: "ClusterPolicy", Name: s.PolicyName, Action: plan.WriteApply})
	return nil
}

// State says whether the ClusterPolicy exists.
func (clusterPolicyKind) State(ctx context.Context, x *executor, s *plan.Step) (string, error) {
	name := s.PolicyName
	u, err := x.clients.Dynamic.Resource(health.ClusterPolicyResource()).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "ClusterPolicy " + name + " does not exist", nil
	}
	if err != nil {
		return "", err
	}
	return "ClusterPolicy " + u.GetName() + " exists", nil
}

func (clusterPolicyKind) Explained() bool { return false }

// Needs: the Subscription and its CSV are read, the ClusterPolicy applied.
func (clusterPolicyKind) Needs(s *plan.Step, _ string) []preflight.Access {
	ns, _ := splitTarget(s.Target)
	out := access(ns, kube.SubscriptionsGVR.Group, kube.SubscriptionsGVR.Resource, "get")
	out = append(out, access(ns, kube.CSVsGVR.Group, kube.CSVsGVR.Resource, "get")...)
	return append(out, access("", "nvidia.com", "clusterpolicies", "get", "create", "patch")...)
}

// Recorded: nothing here; the record names the stack's custom resources gpuctl made by UID.
func (clusterPolicyKind) Recorded(*plan.Step) (Recorded, error) { return Recorded{}, nil }
func (clusterPolicyKind) Rendered(*plan.Step) Rendered          { return Rendered{} }

// Exported: nothing; an OpenShift plan is not exported (docs/gitops.md).
func (clusterPolicyKind) Exported(*plan.Step) Exported { return Exported{} }
