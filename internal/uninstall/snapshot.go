package uninstall

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/internal/record"
)

// Snapshot is the cluster as an uninstall finds it: everything Build and Permissions decide over.
// Read fills it and writes nothing; a test writes one by hand.
type Snapshot struct {
	// Record is the install record (nil: none).
	Record *record.Record
	// Namespace is the stack's namespace: the record's, else the one gpuctl was pointed at (-n).
	Namespace string
	// Releases are the installed releases of gpuctl's: the record's, or without a record those of
	// gpuctl's release names in Namespace.
	Releases []InstalledRelease
	// Stack are the objects of the stack's custom resource kinds (record.StackResources), everywhere.
	Stack []StackObject
	// NodeFeatures are the NodeFeature objects NFD's workers wrote, by the name of the NFD release in
	// whose namespace they are.
	NodeFeatures map[string][]Ref
	// Nodes are the nodes with their labels, annotations and managed fields, read only when gpuctl
	// may give some of their labels back (whose).
	Nodes []corev1.Node
	// Tainted is how many nodes carry a taint gpuctl added.
	Tainted int
	// Mappings are the kinds of the releases' manifests and of the stack's objects as the API server
	// serves them; a kind it does not serve has none.
	Mappings map[schema.GroupVersionKind]Mapping
	// Served are the kinds of the operator's operands (dependentResources) the API server serves.
	Served map[schema.GroupVersionResource]bool
	// Purge is what --purge decides over (nil without --purge, or without a record).
	Purge *PurgeSnapshot
}

// InstalledRelease is an installed Helm release of one of gpuctl's names.
type InstalledRelease struct {
	Name, Namespace string
	// Gpuctl: its newest revision carries gpuctl's release label (read when there is no record).
	Gpuctl bool
	// Manifest is its newest revision's manifest ("" when it has none).
	Manifest string
}

// StackObject is an object of one of the stack's custom resource kinds: as the record would name it
// (its UID included), and as it is.
type StackObject struct {
	Ref    record.Object
	Object unstructured.Unstructured
}

// Ref names an object as it was read.
type Ref struct {
	Namespace, Name string
	UID             types.UID
}

// Mapping is how the API server serves a kind: its resource, and whether it is namespaced.
type Mapping struct {
	Resource   schema.GroupVersionResource
	Namespaced bool
}

// PurgeSnapshot is what --purge decides over: each object, CRD and namespace the record says gpuctl
// created that is still there, with its UID now.
type PurgeSnapshot struct {
	Objects []Found
	CRDs    []FoundCRD
	// CSVs are the UIDs of the ClusterServiceVersions the releases' Subscriptions installed: OLM's, for
	// gpuctl's Subscriptions, deleted with the releases.
	CSVs       []types.UID
	Namespaces []FoundNamespace
}

// Found is an object the record names, as found now: the object of that name has UID.
type Found struct {
	Recorded record.Object
	UID      types.UID
}

// FoundCRD is a CRD gpuctl created, found now, with its custom resources in every namespace (listed
// when it is the CRD gpuctl created and serves a version).
type FoundCRD struct {
	Found
	// Kind is the kind of its custom resources.
	Kind      string
	Resources []unstructured.Unstructured
}

// FoundNamespace is a namespace gpuctl created, found now, with what it holds (listed when it is the
// namespace gpuctl created).
type FoundNamespace struct {
	Found
	Contents *Contents
}

// isRecorded says whether the object found now with UID now is the one the record names: the
// recorded UID, or any UID for a record of an older gpuctl that kept none.
func isRecorded(o record.Object, now types.UID) bool {
	return o.UID == "" || o.UID == now
}
