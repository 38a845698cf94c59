package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/record"
)

// UninstallPlan is every decision of an uninstall, made before its first write: the releases it
// removes, the custom resources it deletes (by UID) and those it keeps and why, each node's label
// changes, and for --purge what goes with the CRDs. The run carries out exactly this (node labels by
// the same rule, applied again once the operator has stopped writing them); --dry-run prints it.
type UninstallPlan struct {
	Releases []PlannedRelease `json:"releases,omitempty"`
	// Delete are the objects uninstall deletes, each only if it still has that UID.
	Delete []PlannedDeletion `json:"delete,omitempty"`
	// Kept are the stack's custom resources uninstall leaves, with why.
	Kept  []KeptObject    `json:"kept,omitempty"`
	Nodes []NodeLabelPlan `json:"nodes,omitempty"`
	Purge *PurgePlan      `json:"purge,omitempty"`
}

// PlannedRelease is a Helm release uninstall removes.
type PlannedRelease struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// PlannedDeletion is an object uninstall deletes, in the step that names it.
type PlannedDeletion struct {
	Step       string    `json:"step"`
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Namespace  string    `json:"namespace,omitempty"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid"`
	// Why says how gpuctl knows the object is its own.
	Why string `json:"why"`
}

func (d PlannedDeletion) String() string { return describe(d.Kind, d.Namespace, d.Name) }

// KeptObject is an object uninstall leaves where it is.
type KeptObject struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Why       string `json:"why"`
}

func (k KeptObject) String() string {
	return describe(k.Kind, k.Namespace, k.Name) + " (" + k.Why + ")"
}

// PurgePlan is what --purge deletes besides: the CRDs, namespaces and other objects gpuctl created.
type PurgePlan struct {
	// CRDs name the CRDs it deletes (Delete has them with their UIDs).
	CRDs []string `json:"crds,omitempty"`
	// Foreign are custom resources of those CRDs gpuctl did not create ("Kind namespace/name"):
	// deleting a CRD deletes them, so the purge stops before its first write unless Forced.
	Foreign []string `json:"foreign,omitempty"`
	Forced  bool     `json:"forced,omitempty"`
	// Delete are the other objects, CRDs and namespaces it deletes (steps purge-objects, purge-crds,
	// purge-namespaces), each only while it has the planned UID: the one the record keeps, or, in a
	// record of an older gpuctl that kept none, the UID of the object of that name now (Why says so).
	Delete []PlannedDeletion `json:"delete,omitempty"`
	// Kept are objects of a name the record says gpuctl created that are not the one it created
	// (another UID): someone re-created them, and they stay.
	Kept []KeptObject `json:"kept,omitempty"`
	// KeptNamespaces are namespaces gpuctl created that hold objects it did not create: they stay.
	KeptNamespaces []KeptNamespace `json:"keptNamespaces,omitempty"`
	// ours are the UIDs of gpuctl's objects in the namespaces it deletes, as the plan judged them: the
	// run's second look, when their owners may be gone, still knows them.
	ours map[types.UID]bool
}

// Steps of --purge.
const (
	stepPurgeObjects    = "purge-objects"
	stepPurgeCRDs       = "purge-crds"
	stepPurgeNamespaces = "purge-namespaces"
)

// notTheOne is why an object of a recorded name stays: it is not the one gpuctl created.
const notTheOne = "not the one gpuctl created (UID differs)"

// deletions are the purge's deletions in one step.
func (pp *PurgePlan) deletions(step string) []PlannedDeletion {
	if pp == nil {
		return nil
	}
	var out []PlannedDeletion
	for _, d := range pp.Delete {
		if d.Step == step {
			out = append(out, d)
		}
	}
	return out
}

// ForeignResourcesError stops uninstall --purge before its first write: deleting the CRDs gpuctl
// created would delete these custom resources, which gpuctl did not create. It is a failed preflight
// (exit 5).
type ForeignResourcesError struct {
	Objects []string
}

func (e *ForeignResourcesError) Error() string {
	return fmt.Sprintf("--purge would delete %d custom resources gpuctl did not create, with their CRDs: %s; "+
		"delete or move them first, or pass --force to delete them too", len(e.Objects), strings.Join(e.Objects, ", "))
}

// Unwrap makes the refusal a failed preflight: nothing was changed.
func (e *ForeignResourcesError) Unwrap() error { return preflight.ErrFailed }

// Steps of an uninstall that delete planned objects.
const (
	stepDeleteCustomResources = "delete-custom-resources"
	stepDeleteNFDInstance     = "delete-nfd-instance"
)

// nodeFeatureStep is the step that deletes the NodeFeature objects an NFD release's workers wrote:
// the release's own.
func releaseStep(name string) string { return "uninstall-" + name }

// Plan makes every decision of the uninstall from the record and the cluster as they are now.
func (u *Uninstaller) Plan(ctx context.Context) (*UninstallPlan, error) {
	if err := u.RefuseUnrecorded(ctx); err != nil {
		return nil, err
	}
	rels, err := u.targets()
	if err != nil {
		return nil, err
	}
	u.rels = rels
	p := &UninstallPlan{}
	for _, r := range rels {
		p.Releases = append(p.Releases, PlannedRelease{Name: r.name, Namespace: r.namespace})
	}
	if err := u.planCustomResources(ctx, p, rels); err != nil {
		return nil, err
	}
	for _, r := range rels {
		if releaseOrder(r.name) != 2 {
			continue
		}
		// NFD's workers leave a NodeFeature object per node in the release's namespace
		// (kubernetes-sigs/node-feature-discovery docs/usage/custom-resources.md: NodeFeature).
		list, err := u.Clients.Dynamic.Resource(nodeFeaturesGVR).Namespace(r.namespace).List(ctx, metav1.ListOptions{})
		if err != nil && !kube.Absent(err) {
			return nil, fmt.Errorf("list NodeFeature objects in %s: %w", r.namespace, err)
		}
		if list == nil {
			continue
		}
		for _, o := range list.Items {
			p.Delete = append(p.Delete, PlannedDeletion{Step: releaseStep(r.name), APIVersion: nodeFeaturesGVR.GroupVersion().String(), Kind: "NodeFeature",
				Namespace: o.GetNamespace(), Name: o.GetName(), UID: o.GetUID(), Why: "written by the workers of release " + r.name})
		}
	}
	if p.Nodes, err = u.planNodes(ctx); err != nil {
		return nil, err
	}
	if u.Purge {
		if p.Purge, err = u.planPurge(ctx, p, rels); err != nil {
			return p, err
		}
	}
	return p, nil
}

// planCustomResources decides which ClusterPolicy, NVIDIADriver and NodeFeatureDiscovery objects go:
// those the record names by UID; with a record of an older gpuctl (or none), those provably gpuctl's
// by their Helm release or gpuctl's field manager. Every other one stays, and the plan says so.
func (u *Uninstaller) planCustomResources(ctx context.Context, p *UninstallPlan, rels []uninstallRelease) error {
	refs, objs, err := record.ListStackResources(ctx, u.Clients.Dynamic)
	if err != nil {
		return err
	}
	tracked := u.Record != nil && u.Record.TracksCustomResources
	recorded := map[types.UID]bool{}
	if tracked {
		for _, o := range u.Record.CustomResources {
			recorded[o.UID] = true
		}
	}
	for i, o := range refs {
		var why string
		switch {
		case tracked && recorded[o.UID]:
			why = "created by gpuctl (install record)"
		case !tracked:
			if prov := record.Provenance(&objs[i], releaseRefs(rels)); prov != "" {
				why = prov
			}
		}
		if why == "" {
			keep := "not created by gpuctl"
			if !tracked {
				keep = "not provably gpuctl's: the install record predates UIDs and neither a gpuctl release nor gpuctl's field manager made it"
			}
			p.Kept = append(p.Kept, KeptObject{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, Why: keep})
			continue
		}
		step := stepDeleteCustomResources
		if o.Kind == "NodeFeatureDiscovery" {
			step = stepDeleteNFDInstance
		}
		p.Delete = append(p.Delete, PlannedDeletion{Step: step, APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: o.UID, Why: why})
	}
	return nil
}

// planNodes decides every node's label and annotation changes.
func (u *Uninstaller) planNodes(ctx context.Context) ([]NodeLabelPlan, error) {
	nfd := u.ours(plan.NFDRelease, "nfd-operator")
	operator := u.ours(plan.OperatorRelease, plan.OperatorPackage)
	if !nfd && !operator {
		return nil, nil
	}
	var before map[string]record.NodeMetadata
	if u.Record != nil {
		before = u.Record.NodeMetadataBefore
	}
	nodes, err := u.Clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var out []NodeLabelPlan
	for i := range nodes.Items {
		np := planNodeMetadata(&nodes.Items[i], before[nodes.Items[i].Name], nfd, operator)
		if !np.empty() || len(np.Kept) > 0 {
			out = append(out, np)
		}
	}
	return out, nil
}

// planPurge plans what --purge deletes besides: the objects, CRDs and namespaces the record says
// gpuctl created, each by its recorded UID (one of that name with another UID stays, and the plan
// says so). For each CRD it lists every custom resource of it in every namespace: one that this
// uninstall does not delete itself (planned, or an object of a release it uninstalls, or owned by
// such an object) is someone else's, and deleting the CRD would delete it. A namespace that holds
// anything gpuctl did not create stays (foreignIn).
func (u *Uninstaller) planPurge(ctx context.Context, p *UninstallPlan, rels []uninstallRelease) (*PurgePlan, error) {
	pp := &PurgePlan{Forced: u.Force, ours: map[types.UID]bool{}}
	if u.Record == nil {
		return pp, nil
	}
	for _, d := range p.Delete {
		pp.ours[d.UID] = true
	}
	for _, o := range u.Record.CustomResources {
		pp.ours[o.UID] = true
	}
	if err := u.planPurgeObjects(ctx, pp); err != nil {
		return nil, err
	}
	if err := u.planPurgeCRDs(ctx, pp, rels); err != nil {
		return nil, err
	}
	if err := u.planPurgeNamespaces(ctx, pp, rels); err != nil {
		return nil, err
	}
	slices.Sort(pp.Foreign)
	if len(pp.Foreign) > 0 && !u.Force {
		return pp, &ForeignResourcesError{Objects: pp.Foreign}
	}
	return pp, nil
}

// byRecord is the deletion of an object the record says gpuctl created (recorded UID: "" in a record
// of an older gpuctl), found now with UID now; ok is false when it is not the one gpuctl created.
func byRecord(step, apiVersion, kind string, o record.Object, now types.UID) (PlannedDeletion, bool) {
	d := PlannedDeletion{Step: step, APIVersion: apiVersion, Kind: kind, Namespace: o.Namespace, Name: o.Name, UID: now,
		Why: "created by gpuctl (install record)"}
	switch {
	case o.UID == "":
		d.Why = "created by gpuctl (install record of an older gpuctl, without UIDs: the object of that name now)"
	case o.UID != now:
		return d, false
	}
	return d, true
}

// planPurgeObjects plans the deletion of the other objects gpuctl created (the NVAIE Secrets,
// profile prerequisites, the PSP RoleBinding): in a namespace gpuctl found, deleting the namespace
// would not.
func (u *Uninstaller) planPurgeObjects(ctx context.Context, pp *PurgePlan) error {
	for _, o := range u.Record.Objects {
		if !o.Created {
			continue
		}
		uid, err := record.UIDNow(ctx, u.Clients, o)
		if err != nil {
			return fmt.Errorf("read %s: %w", describe(o.Kind, o.Namespace, o.Name), err)
		}
		if uid == "" {
			continue // gone, or its kind is no longer served
		}
		d, ok := byRecord(stepPurgeObjects, o.APIVersion, o.Kind, o, uid)
		if !ok {
			pp.Kept = append(pp.Kept, KeptObject{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, Why: notTheOne})
			continue
		}
		pp.Delete = append(pp.Delete, d)
		pp.ours[uid] = true
	}
	return nil
}

// planPurgeCRDs plans the deletion of the CRDs gpuctl created, and lists the custom resources of
// each that this uninstall does not delete itself (Foreign).
func (u *Uninstaller) planPurgeCRDs(ctx context.Context, pp *PurgePlan, rels []uninstallRelease) error {
	crds := u.Clients.Extensions.ApiextensionsV1().CustomResourceDefinitions()
	for _, o := range u.Record.CRDs {
		if !o.Created {
			continue
		}
		crd, err := crds.Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read CRD %s: %w", o.Name, err)
		}
		d, ok := byRecord(stepPurgeCRDs, "apiextensions.k8s.io/v1", "CustomResourceDefinition", o, crd.UID)
		if !ok {
			pp.Kept = append(pp.Kept, KeptObject{Kind: "CustomResourceDefinition", Name: o.Name, Why: notTheOne})
			continue
		}
		pp.CRDs = append(pp.CRDs, o.Name)
		pp.Delete = append(pp.Delete, d)
		version := ""
		for _, v := range crd.Spec.Versions {
			if v.Served && (version == "" || v.Storage) {
				version = v.Name
			}
		}
		if version == "" {
			continue // nothing served: nothing to list, nor to lose but the stored objects' CRD
		}
		gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Spec.Names.Plural}
		list, err := u.Clients.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
		if kube.Absent(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("list the %s of CRD %s: %w", crd.Spec.Names.Plural, o.Name, err)
		}
		for i := range list.Items {
			o := &list.Items[i]
			if pp.ours[o.GetUID()] || strings.HasPrefix(record.Provenance(withoutManagedFields(o), releaseRefs(rels)), "release ") ||
				slices.ContainsFunc(o.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return pp.ours[r.UID] }) {
				continue
			}
			pp.Foreign = append(pp.Foreign, describe(crd.Spec.Names.Kind, o.GetNamespace(), o.GetName()))
		}
	}
	return nil
}

// planPurgeNamespaces plans the deletion of the namespaces gpuctl created that hold nothing but
// gpuctl's objects; the others stay, with what they hold.
func (u *Uninstaller) planPurgeNamespaces(ctx context.Context, pp *PurgePlan, rels []uninstallRelease) error {
	for _, r := range rels {
		// On OpenShift the operator runs from the CSV the release's Subscription installed: OLM's, for
		// gpuctl's Subscription, deleted with the release.
		for _, csv := range u.installedCSVs(ctx, r.namespace) {
			if obj, err := u.Clients.Dynamic.Resource(kube.CSVsGVR).Namespace(r.namespace).Get(ctx, csv, metav1.GetOptions{}); err == nil {
				pp.ours[obj.GetUID()] = true
			}
		}
	}
	for _, o := range u.Record.Namespaces {
		if !o.Created {
			continue
		}
		ns, err := u.Clients.Kube.CoreV1().Namespaces().Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read namespace %s: %w", o.Name, err)
		}
		d, ok := byRecord(stepPurgeNamespaces, "v1", "Namespace", o, ns.UID)
		if !ok {
			pp.Kept = append(pp.Kept, KeptObject{Kind: "Namespace", Name: o.Name, Why: notTheOne})
			continue
		}
		foreign, err := u.foreignIn(ctx, o.Name, pp.ours, rels)
		if err != nil {
			return err
		}
		if len(foreign) > 0 {
			pp.KeptNamespaces = append(pp.KeptNamespaces, keptNamespace(o.Name, foreign))
			continue
		}
		pp.Delete = append(pp.Delete, d)
	}
	return nil
}

// withoutManagedFields is obj judged by its Helm annotations alone.
func withoutManagedFields(obj *unstructured.Unstructured) *unstructured.Unstructured {
	c := obj.DeepCopy()
	c.SetManagedFields(nil)
	return c
}

// deletions are the plan's deletions in one step.
func (p *UninstallPlan) deletions(step string) []PlannedDeletion {
	var out []PlannedDeletion
	for _, d := range p.Delete {
		if d.Step == step {
			out = append(out, d)
		}
	}
	return out
}
