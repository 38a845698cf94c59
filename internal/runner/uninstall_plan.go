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
	CRDs []string `json:"crds,omitempty"`
	// Foreign are custom resources of those CRDs gpuctl did not create ("Kind namespace/name"):
	// deleting a CRD deletes them, so the purge stops before its first write unless Forced.
	Foreign []string `json:"foreign,omitempty"`
	Forced  bool     `json:"forced,omitempty"`
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
	refs, objs, err := listStackResources(ctx, u.Clients.Dynamic)
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
			if prov := provenance(&objs[i], rels); prov != "" {
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

// planPurge lists the CRDs --purge deletes and, for each, every custom resource of it in every
// namespace: one that this uninstall does not delete itself (planned, or an object of a release it
// uninstalls, or owned by such an object) is someone else's, and deleting the CRD would delete it.
func (u *Uninstaller) planPurge(ctx context.Context, p *UninstallPlan, rels []uninstallRelease) (*PurgePlan, error) {
	pp := &PurgePlan{Forced: u.Force}
	if u.Record == nil {
		return pp, nil
	}
	planned := map[types.UID]bool{}
	for _, d := range p.Delete {
		planned[d.UID] = true
	}
	crds := u.Clients.Extensions.ApiextensionsV1().CustomResourceDefinitions()
	for _, name := range record.CreatedNames(u.Record.CRDs) {
		crd, err := crds.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read CRD %s: %w", name, err)
		}
		pp.CRDs = append(pp.CRDs, name)
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
			return nil, fmt.Errorf("list the %s of CRD %s: %w", crd.Spec.Names.Plural, name, err)
		}
		for i := range list.Items {
			o := &list.Items[i]
			if planned[o.GetUID()] || strings.HasPrefix(provenance(withoutManagedFields(o), rels), "release ") ||
				slices.ContainsFunc(o.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return planned[r.UID] }) {
				continue
			}
			pp.Foreign = append(pp.Foreign, describe(crd.Spec.Names.Kind, o.GetNamespace(), o.GetName()))
		}
	}
	slices.Sort(pp.Foreign)
	if len(pp.Foreign) > 0 && !u.Force {
		return pp, &ForeignResourcesError{Objects: pp.Foreign}
	}
	return pp, nil
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
