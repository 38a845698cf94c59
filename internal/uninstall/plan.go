package uninstall

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/internal/record"
)

// Plan is every decision of an uninstall, made before its first write: the releases it removes, the
// custom resources it deletes (by UID) and those it keeps and why, each node's label changes, and for
// --purge what goes with the CRDs. The run carries out exactly this (node labels by the same rule,
// applied again once the operator has stopped writing them); --dry-run prints it.
type Plan struct {
	Releases []PlannedRelease `json:"releases,omitempty"`
	// Delete are the objects uninstall deletes, each only if it still has that UID.
	Delete []PlannedDeletion `json:"delete,omitempty"`
	// Kept are the stack's custom resources uninstall leaves, with why.
	Kept  []KeptObject    `json:"kept,omitempty"`
	Nodes []NodeLabelPlan `json:"nodes,omitempty"`
	Purge *PurgePlan      `json:"purge,omitempty"`

	// record is the install record the run updates (nil: none); namespace the stack's, where the
	// operator's operands are; nfd and operator say whose node labels the run gives back (whose).
	record        *record.Record
	namespace     string
	nfd, operator bool
}

// PlannedRelease is a Helm release uninstall removes.
type PlannedRelease struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Role orders the releases (the plan's order says it, so it is not in the document).
	Role Role `json:"-"`
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

// String names the object as kubectl's users read it.
func (d PlannedDeletion) String() string { return describe(d.Kind, d.Namespace, d.Name) }

// KeptObject is an object uninstall leaves where it is.
type KeptObject struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Why       string `json:"why"`
}

// String names the object and why it stays.
func (k KeptObject) String() string {
	return describe(k.Kind, k.Namespace, k.Name) + " (" + k.Why + ")"
}

// Steps of an uninstall that delete planned objects.
const (
	stepDeleteCustomResources = "delete-custom-resources"
	stepDeleteNFDInstance     = "delete-nfd-instance"
)

// releaseStep is the step that uninstalls release name; it also deletes the NodeFeature objects an
// NFD release's workers wrote.
func releaseStep(name string) string { return "uninstall-" + name }

// Build makes every decision of the uninstall from s, and touches no cluster: the releases it removes
// (in the order of their roles), the custom resources it deletes by UID and those it keeps, NFD's
// NodeFeatures, each node's label changes, and with o.Purge what goes with the CRDs. It refuses an
// uninstall without a record unless adopted (UnrecordedError) and, unless forced, a purge that would
// delete custom resources gpuctl did not create (ForeignResourcesError, returned with the plan).
func Build(s *Snapshot, o Options) (*Plan, error) {
	if err := RefuseUnrecorded(s, o); err != nil {
		return nil, err
	}
	p := &Plan{Releases: plannedReleases(s), record: s.Record, namespace: s.Namespace}
	p.nfd, p.operator = whose(s.Record, o.Adopt)
	planCustomResources(s, p)
	for _, r := range p.Releases {
		if r.Role != RoleNFD {
			continue
		}
		// NFD's workers leave a NodeFeature object per node in the release's namespace.
		for _, f := range s.NodeFeatures[r.Name] {
			p.Delete = append(p.Delete, PlannedDeletion{Step: releaseStep(r.Name), APIVersion: nodeFeaturesGVR.GroupVersion().String(), Kind: "NodeFeature",
				Namespace: f.Namespace, Name: f.Name, UID: f.UID, Why: "written by the workers of release " + r.Name})
		}
	}
	if p.nfd || p.operator {
		p.Nodes = planNodes(s.Nodes, s.Record, p.nfd, p.operator)
	}
	if !o.Purge {
		return p, nil
	}
	var err error
	p.Purge, err = planPurge(s, p, o.Force)
	return p, err
}

// plannedReleases are s's releases in the order uninstall removes them: by role, the reverse of
// install's.
func plannedReleases(s *Snapshot) []PlannedRelease {
	var out []PlannedRelease
	for _, r := range byRole(s.Releases) {
		out = append(out, PlannedRelease{Name: r.Name, Namespace: r.Namespace, Role: roleOf(r.Name)})
	}
	return out
}

// byRole are rels sorted by their roles (stably: the record's order within a role).
func byRole(rels []InstalledRelease) []InstalledRelease {
	out := slices.Clone(rels)
	slices.SortStableFunc(out, func(a, b InstalledRelease) int { return cmp.Compare(roleOf(a.Name), roleOf(b.Name)) })
	return out
}

// planCustomResources decides which ClusterPolicy, GPUCluster, NVIDIADriver and NodeFeatureDiscovery
// objects go: those the record names by UID; with a record of an older gpuctl (or none), those
// provably gpuctl's by their Helm release or gpuctl's field manager. Every other one stays, and the
// plan says so.
func planCustomResources(s *Snapshot, p *Plan) {
	tracked := s.Record != nil && s.Record.TracksCustomResources
	recorded := map[types.UID]bool{}
	if tracked {
		for _, o := range s.Record.CustomResources {
			recorded[o.UID] = true
		}
	}
	for _, so := range s.Stack {
		o := so.Ref
		var why string
		switch {
		case tracked && recorded[o.UID]:
			why = "created by gpuctl (install record)"
		case !tracked:
			why = record.Provenance(&so.Object, releaseRefs(p.Releases))
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
}

// planNodes decides every node's label and annotation changes (planNodeMetadata), against what the
// record says they were before the first install.
func planNodes(nodes []corev1.Node, rec *record.Record, nfd, operator bool) []NodeLabelPlan {
	before := metadataBefore(rec)
	var out []NodeLabelPlan
	for i := range nodes {
		np := planNodeMetadata(&nodes[i], before[nodes[i].Name], nfd, operator)
		if !np.empty() || len(np.Kept) > 0 {
			out = append(out, np)
		}
	}
	return out
}

// metadataBefore is each node's labels and annotations in the stack's prefixes as they were before
// gpuctl's first install, as rec keeps them (none without a record).
func metadataBefore(rec *record.Record) map[string]record.NodeMetadata {
	if rec == nil {
		return nil
	}
	return rec.NodeMetadataBefore
}

// deletions are the plan's deletions in one step.
func (p *Plan) deletions(step string) []PlannedDeletion {
	return stepDeletions(p.Delete, step)
}

// stepDeletions are the deletions of ds in one step.
func stepDeletions(ds []PlannedDeletion, step string) []PlannedDeletion {
	var out []PlannedDeletion
	for _, d := range ds {
		if d.Step == step {
			out = append(out, d)
		}
	}
	return out
}

// releaseRefs names the releases for record.Provenance.
func releaseRefs(rels []PlannedRelease) []record.ReleaseRef {
	out := make([]record.ReleaseRef, len(rels))
	for i, r := range rels {
		out[i] = record.ReleaseRef{Name: r.Name, Namespace: r.Namespace}
	}
	return out
}

// withoutManagedFields is obj judged by its Helm annotations alone.
func withoutManagedFields(obj *unstructured.Unstructured) *unstructured.Unstructured {
	c := obj.DeepCopy()
	c.SetManagedFields(nil)
	return c
}

// describe names an object as kubectl's users read it: "Kind namespace/name" or "Kind name".
func describe(kind, namespace, name string) string {
	if namespace != "" {
		return kind + " " + namespace + "/" + name
	}
	return kind + " " + name
}
