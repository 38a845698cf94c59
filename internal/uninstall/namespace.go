package uninstall

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/internal/record"
)

// KeptNamespace is a namespace gpuctl created that --purge keeps: it holds objects gpuctl did not
// create, which deleting it would delete.
type KeptNamespace struct {
	Name string `json:"name"`
	// Holds are the first of those objects ("Kind name", sorted), at most maxShown; More counts the rest.
	Holds []string `json:"holds"`
	More  int      `json:"more,omitempty"`
}

// maxShown bounds the objects a kept namespace lists.
const maxShown = 10

// String says which namespace is kept and what it holds that gpuctl did not create.
func (k KeptNamespace) String() string {
	more := ""
	if k.More > 0 {
		more = fmt.Sprintf(" and %d more", k.More)
	}
	return "namespace " + k.Name + ": it holds " + strings.Join(k.Holds, ", ") + more + ", which gpuctl did not create"
}

// keptNamespace is the KeptNamespace of ns, which holds foreign.
func keptNamespace(ns string, foreign []string) KeptNamespace {
	k := KeptNamespace{Name: ns, Holds: foreign}
	if len(foreign) > maxShown {
		k.Holds, k.More = foreign[:maxShown], len(foreign)-maxShown
	}
	return k
}

// everyNamespace are the objects Kubernetes and OpenShift put in every namespace, by "Kind/name":
// kube-controller-manager's root CA ConfigMap (root-ca-cert-publisher, Kubernetes 1.20+) and
// default ServiceAccount; OpenShift 4's service CA ConfigMap, its builder and deployer
// ServiceAccounts and their RoleBindings (openshift-controller-manager).
var everyNamespace = map[string]bool{
	"ConfigMap/kube-root-ca.crt": true, "ServiceAccount/default": true,
	"ConfigMap/openshift-service-ca.crt": true, "ServiceAccount/builder": true, "ServiceAccount/deployer": true,
	"RoleBinding/system:image-pullers": true, "RoleBinding/system:image-builders": true, "RoleBinding/system:deployers": true,
}

// stackLeases are the leader-election Leases of the stack's controllers, which name no owner:
// NVIDIA's operator (NVIDIA/gpu-operator cmd/gpu-operator/main.go at v26.7.0, LeaderElectionID) and
// nfd-master (kubernetes-sigs/node-feature-discovery pkg/nfd-master, its LeaseLock; its identity is
// the node's name, not the pod's).
var stackLeases = map[string]bool{"53822513.nvidia.com": true, "nfd-master.nfd.kubernetes.io": true}

// foreignIn lists what namespace ns holds (c) that is not gpuctl's ("Kind name", sorted), with the
// kinds that could not be listed: those cannot say the namespace holds nothing else. gpuctl's are
// those whose UID is in ours (what the plan deletes, the record's objects, what an earlier look judged
// gpuctl's), the objects of its releases rels (Helm's ownership annotations), those releases' own
// storage Secrets, what Kubernetes puts in every namespace, and whatever has an owner reference to
// one of them (the EndpointSlices of a Service of theirs too, and the Secrets of a ServiceAccount, the
// Leases of the stack's controllers). The UIDs judged gpuctl's are added to ours, so a later look,
// when owners have gone, still knows their dependents. It reads nothing: c was listed before.
func foreignIn(c *Contents, ns string, ours map[types.UID]bool, rels []PlannedRelease) []string {
	j := newJudge(ns, ours, rels)
	left := c.Objects
	// Until nothing changes: an owner may be listed after what it owns.
	for changed := true; changed; {
		changed = false
		var next []NamespacedObject
		for _, o := range left {
			if j.gpuctls(o) {
				j.ours[o.Object.GetUID()], j.byName[o.key()], changed = true, true, true
				continue
			}
			next = append(next, o)
		}
		left = next
	}
	foreign := slices.Clone(c.Unreadable)
	for _, o := range left {
		foreign = append(foreign, o.Kind+" "+o.Object.GetName())
	}
	slices.Sort(foreign)
	return foreign
}

// judge tells gpuctl's objects in one namespace from others' (see foreignIn).
type judge struct {
	// ours are gpuctl's objects by UID, byName by "Kind/name" (Endpoints, Secrets and Leases name theirs).
	ours   map[types.UID]bool
	byName map[string]bool
	// releases are the names of gpuctl's releases in the namespace; refs all of them.
	releases map[string]bool
	refs     []record.ReleaseRef
}

// newJudge judges the objects of namespace ns, knowing ours and the releases rels.
func newJudge(ns string, ours map[types.UID]bool, rels []PlannedRelease) *judge {
	j := &judge{ours: ours, byName: map[string]bool{}, releases: map[string]bool{}, refs: releaseRefs(rels)}
	for _, r := range rels {
		if r.Namespace == ns {
			j.releases[r.Name] = true
		}
	}
	return j
}

// gpuctls says whether o is gpuctl's, by what is known of gpuctl's objects so far.
func (j *judge) gpuctls(o NamespacedObject) bool {
	obj := &o.Object
	switch {
	case j.ours[obj.GetUID()], everyNamespace[o.key()]:
		return true
	case strings.HasPrefix(record.Provenance(withoutManagedFields(obj), j.refs), "release "):
		return true
	case slices.ContainsFunc(obj.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return j.ours[r.UID] }):
		return true
	}
	l, a := obj.GetLabels(), obj.GetAnnotations()
	switch o.Kind {
	case "Secret":
		// Helm's storage of a release of gpuctl's (helm.sh/helm/v4 pkg/storage/driver/secrets.go), and
		// the token and pull Secrets of a ServiceAccount of gpuctl's or the platform's.
		sa := "ServiceAccount/" + a[corev1.ServiceAccountNameKey]
		return l["owner"] == "helm" && j.releases[l["name"]] ||
			a[corev1.ServiceAccountNameKey] != "" && (j.byName[sa] || everyNamespace[sa])
	case "EndpointSlice":
		return j.byName["Service/"+l["kubernetes.io/service-name"]]
	case "Lease":
		holder, _, _ := unstructured.NestedString(obj.Object, "spec", "holderIdentity")
		pod, _, _ := strings.Cut(holder, "_")
		return stackLeases[obj.GetName()] || pod != "" && j.byName["Pod/"+pod]
	}
	return false
}
