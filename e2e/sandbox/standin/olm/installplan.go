package olm

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// buildCSV is the ClusterServiceVersion a bundle in the catalog would contain: the channel head's
// annotations (alm-examples, …), display name and version from the PackageManifest, and the install
// strategy the stand-in knows for the package.
func buildCSV(namespace string, r olmResolution) (*unstructured.Unstructured, error) {
	strategy, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ptr.To(olmBundleStrategy(r.pkg, r.version)))
	if err != nil {
		return nil, fmt.Errorf("install strategy of %s: %w", r.csv, err)
	}
	annotations := map[string]any{}
	if a, ok := r.desc["annotations"].(map[string]any); ok {
		annotations = a
	}
	displayName := standin.Field(r.desc, "displayName")
	if displayName == "" {
		displayName = r.pkg
	}
	spec := map[string]any{
		"displayName": displayName,
		"version":     r.version,
		"install":     map[string]any{"strategy": "deployment", "spec": strategy},
	}
	for _, f := range []string{"provider", "installModes", "description"} {
		if v, ok := r.desc[f]; ok {
			spec[f] = v
		}
	}
	return &unstructured.Unstructured{Object: runtime.DeepCopyJSON(map[string]any{
		"apiVersion": olmAPIVersion,
		"kind":       olmKindCSV,
		"metadata": map[string]any{
			"name":        r.csv,
			"namespace":   namespace,
			"labels":      map[string]any{olmPackageLabel(r.pkg, namespace): ""},
			"annotations": annotations,
		},
		"spec": spec,
	})}, nil
}

func (o *olmStandIn) syncInstallPlan(ctx context.Context, k olmKey) error {
	plan, err := standin.Get(o.plans, k.namespace, k.name)
	if err != nil || plan == nil {
		return err
	}
	phase := standin.Field(plan.Object, "status", "phase")
	if phase == "" || phase == "Complete" || phase == "Failed" {
		return nil // a new plan's status is written by its Subscription's reconcile
	}
	status, _, _ := unstructured.NestedMap(plan.Object, "status")
	if approved, _, _ := unstructured.NestedBool(plan.Object, "spec", "approved"); !approved {
		status["phase"] = "RequiresApproval"
		return standin.WriteStatus(ctx, o.dyn, olmInstallPlansGVR, plan, status, "")
	}
	groups := olmList(o.groups, plan.GetNamespace())
	if len(groups) != 1 {
		msg := olmNoGroupMessage
		if len(groups) > 1 {
			msg = fmt.Sprintf("more than one operator group(s) are managing this namespace count=%d", len(groups))
		}
		status["phase"] = "Installing"
		conds, _ := status["conditions"].([]any)
		status["conditions"] = standin.SetCondition(conds, "Installed", "False", olmInstallCheckErr, msg)
		return standin.WriteStatus(ctx, o.dyn, olmInstallPlansGVR, plan, status, "")
	}
	group := groups[0]
	steps, _ := status["plan"].([]any)
	for _, s := range steps {
		step, ok := s.(map[string]any)
		if !ok || step["status"] == "Created" || standin.Field(step, "resource", "kind") != olmKindCSV {
			continue
		}
		csv := &unstructured.Unstructured{}
		if err := csv.UnmarshalJSON([]byte(standin.Field(step, "resource", "manifest"))); err != nil {
			return fmt.Errorf("InstallPlan %s/%s: step %s: %w", plan.GetNamespace(), plan.GetName(), standin.Field(step, "resolving"), err)
		}
		csv.SetNamespace(plan.GetNamespace())
		// An upgrade: the Subscription has a CSV installed already, which this one replaces.
		if installed := o.installedCSVOf(plan); installed != "" && installed != csv.GetName() {
			if err := unstructured.SetNestedField(csv.Object, installed, "spec", "replaces"); err != nil {
				return err
			}
		}
		ann := csv.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann["olm.operatorGroup"] = group.GetName()
		ann["olm.operatorNamespace"] = group.GetNamespace()
		ann["olm.targetNamespaces"] = strings.Join(groupTargets(group), ",")
		csv.SetAnnotations(ann)
		_, err := o.dyn.Resource(CSVsGVR).Namespace(plan.GetNamespace()).Create(ctx, csv, metav1.CreateOptions{})
		switch {
		case err == nil:
			o.logf("olm stand-in: InstallPlan %s/%s: created ClusterServiceVersion %s", plan.GetNamespace(), plan.GetName(), csv.GetName())
		case !apierrors.IsAlreadyExists(err): // already there: an earlier pass created it
			return fmt.Errorf("InstallPlan %s/%s: create ClusterServiceVersion %s: %w", plan.GetNamespace(), plan.GetName(), csv.GetName(), err)
		}
		step["status"] = "Created"
	}
	status["phase"] = "Complete"
	conds, _ := status["conditions"].([]any)
	status["conditions"] = standin.SetCondition(conds, "Installed", "True", "", "")
	return standin.WriteStatus(ctx, o.dyn, olmInstallPlansGVR, plan, status, "")
}

// installedCSVOf is the installed CSV of the Subscription that owns an InstallPlan ("" if none).
func (o *olmStandIn) installedCSVOf(plan *unstructured.Unstructured) string {
	for _, ref := range plan.GetOwnerReferences() {
		if ref.Kind != olmKindSub {
			continue
		}
		if sub, err := standin.Get(o.subs, plan.GetNamespace(), ref.Name); err == nil && sub != nil {
			return standin.Field(sub.Object, "status", "installedCSV")
		}
	}
	return ""
}
