package uninstall

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/record"
)

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
	return stepDeletions(pp.Delete, step)
}

// ForeignResourcesError stops uninstall --purge before its first write: deleting the CRDs gpuctl
// created would delete these custom resources, which gpuctl did not create. It is a failed preflight
// (exit 5).
type ForeignResourcesError struct {
	Objects []string
}

// Error names the custom resources and the ways out on one line.
func (e *ForeignResourcesError) Error() string {
	return fmt.Sprintf("--purge would delete %d custom resources gpuctl did not create, with their CRDs: %s; "+
		"delete or move them first, or pass --force to delete them too", len(e.Objects), strings.Join(e.Objects, ", "))
}

// Unwrap makes the refusal a failed preflight: nothing was changed.
func (e *ForeignResourcesError) Unwrap() error { return preflight.ErrFailed }

// planPurge plans what --purge deletes besides p's deletions: the objects, CRDs and namespaces the
// record says gpuctl created, each by its recorded UID (one of that name with another UID stays, and
// the plan says so). Every custom resource of such a CRD that this uninstall does not delete itself
// (planned, or an object of a release it uninstalls, or owned by such an object) is someone else's,
// and deleting the CRD would delete it: without force that refuses the purge. A namespace that holds
// anything gpuctl did not create stays (foreignIn).
func planPurge(s *Snapshot, p *Plan, force bool) (*PurgePlan, error) {
	pp := &PurgePlan{Forced: force, ours: map[types.UID]bool{}}
	if s.Record == nil || s.Purge == nil {
		return pp, nil
	}
	for _, d := range p.Delete {
		pp.ours[d.UID] = true
	}
	for _, o := range s.Record.CustomResources {
		pp.ours[o.UID] = true
	}
	for _, f := range s.Purge.Objects {
		o := f.Recorded
		if pp.keep(o.Kind, o, f.UID) {
			continue
		}
		pp.Delete = append(pp.Delete, byRecord(stepPurgeObjects, o.APIVersion, o.Kind, o, f.UID))
		pp.ours[f.UID] = true
	}
	for _, crd := range s.Purge.CRDs {
		pp.planCRD(crd, p.Releases)
	}
	for _, uid := range s.Purge.CSVs {
		pp.ours[uid] = true
	}
	for _, ns := range s.Purge.Namespaces {
		pp.planNamespace(ns, p.Releases)
	}
	slices.Sort(pp.Foreign)
	if len(pp.Foreign) > 0 && !force {
		return pp, &ForeignResourcesError{Objects: pp.Foreign}
	}
	return pp, nil
}

// keep keeps an object of kind the record names o that is not the one gpuctl created (now has
// another UID), and says whether it did.
func (pp *PurgePlan) keep(kind string, o record.Object, now types.UID) bool {
	if isRecorded(o, now) {
		return false
	}
	pp.Kept = append(pp.Kept, KeptObject{Kind: kind, Namespace: o.Namespace, Name: o.Name, Why: notTheOne})
	return true
}

// byRecord is the deletion of an object the record says gpuctl created (recorded UID: "" in a record
// of an older gpuctl), found now with UID now.
func byRecord(step, apiVersion, kind string, o record.Object, now types.UID) PlannedDeletion {
	why := "created by gpuctl (install record)"
	if o.UID == "" {
		why = "created by gpuctl (install record of an older gpuctl, without UIDs: the object of that name now)"
	}
	return PlannedDeletion{Step: step, APIVersion: apiVersion, Kind: kind, Namespace: o.Namespace, Name: o.Name, UID: now, Why: why}
}

// planCRD plans the deletion of a CRD gpuctl created, and lists the custom resources of it that this
// uninstall does not delete itself (Foreign).
func (pp *PurgePlan) planCRD(crd FoundCRD, rels []PlannedRelease) {
	o := crd.Recorded
	if pp.keep("CustomResourceDefinition", record.Object{Name: o.Name, UID: o.UID}, crd.UID) {
		return
	}
	pp.CRDs = append(pp.CRDs, o.Name)
	pp.Delete = append(pp.Delete, byRecord(stepPurgeCRDs, "apiextensions.k8s.io/v1", "CustomResourceDefinition", o, crd.UID))
	for i := range crd.Resources {
		r := &crd.Resources[i]
		if pp.ours[r.GetUID()] || strings.HasPrefix(record.Provenance(withoutManagedFields(r), releaseRefs(rels)), "release ") ||
			slices.ContainsFunc(r.GetOwnerReferences(), func(ref metav1.OwnerReference) bool { return pp.ours[ref.UID] }) {
			continue
		}
		pp.Foreign = append(pp.Foreign, describe(crd.Kind, r.GetNamespace(), r.GetName()))
	}
}

// planNamespace plans the deletion of a namespace gpuctl created that holds nothing but gpuctl's
// objects; another stays, with what it holds.
func (pp *PurgePlan) planNamespace(ns FoundNamespace, rels []PlannedRelease) {
	o := ns.Recorded
	if pp.keep("Namespace", record.Object{Name: o.Name, UID: o.UID}, ns.UID) {
		return
	}
	if ns.Contents != nil {
		if foreign := foreignIn(ns.Contents, o.Name, pp.ours, rels); len(foreign) > 0 {
			pp.KeptNamespaces = append(pp.KeptNamespaces, keptNamespace(o.Name, foreign))
			return
		}
	}
	pp.Delete = append(pp.Delete, byRecord(stepPurgeNamespaces, "v1", "Namespace", o, ns.UID))
}
