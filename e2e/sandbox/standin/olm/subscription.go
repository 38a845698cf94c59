package olm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// olmResolution is what a Subscription resolves to in its catalog.
type olmResolution struct {
	pkg, source, sourceNamespace string
	catalogMissing               bool
	// failure is the ResolutionFailed message; empty when resolution succeeded.
	failure string
	csv     string
	version string
	// desc is the channel's currentCSVDesc: displayName, version, annotations (alm-examples), ….
	desc map[string]any
}

func (o *olmStandIn) catalogExists(name, namespace string) bool {
	if o.catalogs != nil {
		if cat, _ := standin.Get(o.catalogs, namespace, name); cat != nil {
			return true
		}
	}
	return o.findPackage("", name, namespace) != nil
}

// findPackage returns the PackageManifest of package pkg (any package if pkg is "") from catalog
// source in namespace sourceNS. Real PackageManifests are served in every namespace by OLM's
// package server; the flavour stores them in the catalog's namespace, so both the object's namespace
// and status.catalogSourceNamespace count.
func (o *olmStandIn) findPackage(pkg, source, sourceNS string) *unstructured.Unstructured {
	for _, pm := range olmList(o.packages, "") {
		name := standin.Field(pm.Object, "status", "packageName")
		if name == "" {
			name = pm.GetName()
		}
		catNS := standin.Field(pm.Object, "status", "catalogSourceNamespace")
		if catNS == "" {
			catNS = pm.GetNamespace()
		}
		if (pkg == "" || name == pkg) && catNS == sourceNS && standin.Field(pm.Object, "status", "catalogSource") == source {
			return pm
		}
	}
	return nil
}

// resolve finds what sub installs. Messages follow OLM v0's resolver ("constraints not satisfiable:
// …"), which the research's OpenShift section and OLM's own tests show.
func (o *olmStandIn) resolve(sub *unstructured.Unstructured) olmResolution {
	r := olmResolution{
		pkg:             standin.Field(sub.Object, "spec", "name"),
		source:          standin.Field(sub.Object, "spec", "source"),
		sourceNamespace: standin.Field(sub.Object, "spec", "sourceNamespace"),
	}
	name := sub.GetName()
	r.catalogMissing = !o.catalogExists(r.source, r.sourceNamespace)
	pm := o.findPackage(r.pkg, r.source, r.sourceNamespace)
	if pm == nil {
		if r.catalogMissing {
			r.failure = fmt.Sprintf("constraints not satisfiable: no operators found from catalog %s in namespace %s referenced by subscription %s, subscription %s exists",
				r.source, r.sourceNamespace, name, name)
		} else {
			r.failure = fmt.Sprintf("constraints not satisfiable: no operators found in package %s in the catalog referenced by subscription %s, subscription %s exists",
				r.pkg, name, name)
		}
		return r
	}
	channel := standin.Field(sub.Object, "spec", "channel")
	if channel == "" {
		channel = standin.Field(pm.Object, "status", "defaultChannel")
	}
	channels, _, _ := unstructured.NestedSlice(pm.Object, "status", "channels")
	var ch map[string]any
	for _, c := range channels {
		if m, ok := c.(map[string]any); ok && m["name"] == channel {
			ch = m
		}
	}
	if ch == nil {
		r.failure = fmt.Sprintf("constraints not satisfiable: no operators found in channel %s of package %s in the catalog referenced by subscription %s, subscription %s exists",
			channel, r.pkg, name, name)
		return r
	}
	r.csv = standin.Field(ch, "currentCSV")
	r.desc, _, _ = unstructured.NestedMap(ch, "currentCSVDesc")
	r.version = standin.Field(r.desc, "version")
	if start := standin.Field(sub.Object, "spec", "startingCSV"); start != "" && start != r.csv {
		entries, _, _ := unstructured.NestedSlice(ch, "entries")
		found := false
		for _, e := range entries {
			if m, ok := e.(map[string]any); ok && m["name"] == start {
				r.csv, r.version, found = start, standin.Field(m, "version"), true
			}
		}
		if !found {
			r.failure = fmt.Sprintf("constraints not satisfiable: no operators found with name %s in channel %s of package %s in the catalog referenced by subscription %s, subscription %s exists",
				start, channel, r.pkg, name, name)
		}
	}
	if r.version == "" {
		// Bundle names are <package>.v<version> by convention.
		if _, v, ok := strings.Cut(r.csv, ".v"); ok {
			r.version = v
		}
	}
	return r
}

func (o *olmStandIn) syncSubscription(ctx context.Context, k olmKey) error {
	sub, err := standin.Get(o.subs, k.namespace, k.name)
	if err != nil {
		return err
	}
	if sub == nil {
		delete(o.planned, k) // the CSV stays, as with OLM
		return nil
	}
	r := o.resolve(sub)
	status, _, _ := unstructured.NestedMap(sub.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	conds, _, _ := unstructured.NestedSlice(sub.Object, "status", "conditions")
	if r.catalogMissing {
		conds = standin.SetCondition(conds, "CatalogSourcesUnhealthy", "True", "UnhealthyCatalogSourceFound",
			fmt.Sprintf("targeted catalogsource %s/%s missing", r.sourceNamespace, r.source))
	} else {
		conds = standin.SetCondition(conds, "CatalogSourcesUnhealthy", "False", "AllCatalogSourcesHealthy", "all available catalogsources are healthy")
	}
	if r.failure != "" {
		status["conditions"] = standin.SetCondition(conds, "ResolutionFailed", "True", "ConstraintsNotSatisfiable", r.failure)
		return standin.WriteStatus(ctx, o.dyn, SubscriptionsGVR, sub, status, "lastUpdated")
	}
	conds = olmRemoveCondition(conds, "ResolutionFailed")

	csv, err := standin.Get(o.csvs, sub.GetNamespace(), r.csv)
	if err != nil {
		return err
	}
	if csv == nil { // the cache may be behind a plan that just completed
		csv, err = o.dyn.Resource(CSVsGVR).Namespace(sub.GetNamespace()).Get(ctx, r.csv, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			csv, err = nil, nil
		}
		if err != nil {
			return err
		}
	}
	plan, err := o.planFor(ctx, k, sub, r.csv, csv != nil)
	if err != nil {
		return err
	}
	if plan == nil && csv == nil {
		if plan, err = o.createInstallPlan(ctx, k, sub, r); err != nil {
			return err
		}
	}
	if plan != nil {
		if standin.Field(plan.Object, "status", "phase") == "" {
			if plan, err = o.initInstallPlanStatus(ctx, plan, sub, r); err != nil {
				return err
			}
		}
		status["installPlanRef"] = map[string]any{
			"apiVersion": olmAPIVersion, "kind": olmKindPlan,
			"name": plan.GetName(), "namespace": plan.GetNamespace(), "uid": string(plan.GetUID()),
		}
		status["installplan"] = map[string]any{
			"apiVersion": olmAPIVersion, "kind": olmKindPlan, "name": plan.GetName(), "uuid": string(plan.GetUID()),
		}
		status["installPlanGeneration"] = int64(1)
	}
	status["currentCSV"] = r.csv
	if csv != nil {
		status["installedCSV"] = r.csv
		status["state"] = "AtLatestKnown"
		conds = olmRemoveCondition(conds, "InstallPlanPending")
	} else {
		status["state"] = "UpgradePending"
		reason := "Installing"
		if plan != nil && standin.Field(plan.Object, "status", "phase") == "RequiresApproval" {
			reason = "RequiresApproval"
		}
		conds = standin.SetCondition(conds, "InstallPlanPending", "True", reason, "")
	}
	status["conditions"] = conds
	return standin.WriteStatus(ctx, o.dyn, SubscriptionsGVR, sub, status, "lastUpdated")
}

// planFor finds the InstallPlan already made for sub to install csv: the one this stand-in created
// last, the one its status references, or one it owns. A completed plan whose CSV has been deleted
// does not count: OLM installs the CSV again while the Subscription exists.
func (o *olmStandIn) planFor(ctx context.Context, k olmKey, sub *unstructured.Unstructured, csv string, installed bool) (*unstructured.Unstructured, error) {
	usable := func(plan *unstructured.Unstructured) bool {
		return planInstalls(plan, csv) && (installed || standin.Field(plan.Object, "status", "phase") != "Complete")
	}
	var names []string
	if p, ok := o.planned[k]; ok && p.subUID == string(sub.GetUID()) {
		names = append(names, p.plan)
	}
	if n := standin.Field(sub.Object, "status", "installPlanRef", "name"); n != "" {
		names = append(names, n)
	}
	for _, n := range names {
		plan, err := standin.Get(o.plans, sub.GetNamespace(), n)
		if err != nil {
			return nil, err
		}
		if plan == nil { // perhaps too new for the cache
			plan, err = o.dyn.Resource(olmInstallPlansGVR).Namespace(sub.GetNamespace()).Get(ctx, n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
		}
		if usable(plan) {
			return plan, nil
		}
	}
	for _, plan := range olmList(o.plans, sub.GetNamespace()) {
		for _, ref := range plan.GetOwnerReferences() {
			if ref.UID == sub.GetUID() && usable(plan) {
				return plan, nil
			}
		}
	}
	return nil, nil
}

func planInstalls(plan *unstructured.Unstructured, csv string) bool {
	names, _, _ := unstructured.NestedStringSlice(plan.Object, "spec", "clusterServiceVersionNames")
	return slices.Contains(names, csv)
}

func olmPackageLabel(pkg, namespace string) string {
	return fmt.Sprintf(olmPackageLabelFmt, pkg, namespace)
}

// createInstallPlan creates the InstallPlan for r. Names are generated here, like the API server's
// generateName would (install-xxxxx), because fake clients do not generate names.
func (o *olmStandIn) createInstallPlan(ctx context.Context, k olmKey, sub *unstructured.Unstructured, r olmResolution) (*unstructured.Unstructured, error) {
	approval := standin.Field(sub.Object, "spec", "installPlanApproval")
	if approval == "" {
		approval = "Automatic"
	}
	for range 5 {
		plan := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": olmAPIVersion,
			"kind":       olmKindPlan,
			"metadata": map[string]any{
				"name":         "install-" + utilrand.String(5),
				"generateName": "install-",
				"namespace":    sub.GetNamespace(),
				"labels":       map[string]any{olmPackageLabel(r.pkg, sub.GetNamespace()): ""},
				"ownerReferences": []any{map[string]any{
					"apiVersion": olmAPIVersion, "kind": olmKindSub, "name": sub.GetName(), "uid": string(sub.GetUID()),
					"controller": false, "blockOwnerDeletion": false,
				}},
			},
			"spec": map[string]any{
				"approval":                   approval,
				"approved":                   approval == "Automatic",
				"clusterServiceVersionNames": []any{r.csv},
				"generation":                 int64(1),
			},
		}}
		created, err := o.dyn.Resource(olmInstallPlansGVR).Namespace(sub.GetNamespace()).Create(ctx, plan, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("create InstallPlan for subscription %s/%s: %w", sub.GetNamespace(), sub.GetName(), err)
		}
		o.planned[k] = plannedInstall{subUID: string(sub.GetUID()), plan: created.GetName()}
		o.logf("olm stand-in: subscription %s/%s: InstallPlan %s for %s (approval %s)", sub.GetNamespace(), sub.GetName(), created.GetName(), r.csv, approval)
		return created, nil
	}
	return nil, fmt.Errorf("create InstallPlan for subscription %s/%s: no free name", sub.GetNamespace(), sub.GetName())
}

// initInstallPlanStatus writes a new plan's status: its phase and its one step, the CSV manifest.
func (o *olmStandIn) initInstallPlanStatus(ctx context.Context, plan, sub *unstructured.Unstructured, r olmResolution) (*unstructured.Unstructured, error) {
	csv, err := buildCSV(sub.GetNamespace(), r)
	if err != nil {
		return nil, err
	}
	manifest, err := json.Marshal(csv.Object)
	if err != nil {
		return nil, err
	}
	phase := "Installing"
	if approved, _, _ := unstructured.NestedBool(plan.Object, "spec", "approved"); !approved {
		phase = "RequiresApproval"
	}
	updated := plan.DeepCopy()
	updated.Object["status"] = map[string]any{
		"phase":          phase,
		"catalogSources": []any{r.source},
		"plan": []any{map[string]any{
			"resolving": r.csv,
			"resource": map[string]any{
				"group": "operators.coreos.com", "version": "v1alpha1", "kind": olmKindCSV, "name": r.csv,
				"sourceName": r.source, "sourceNamespace": r.sourceNamespace, "manifest": string(manifest),
			},
			"status": "Unknown",
		}},
	}
	out, err := o.dyn.Resource(olmInstallPlansGVR).Namespace(plan.GetNamespace()).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update status of InstallPlan %s/%s: %w", plan.GetNamespace(), plan.GetName(), err)
	}
	return out, nil
}
