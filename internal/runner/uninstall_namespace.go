package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"

	"github.com/gpuctl/gpuctl/internal/kube"
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

// skippedGroups are API groups whose objects a namespace's deletion does not lose: Events (a log of
// what happened, each with a time to live) and metrics (read from the pods, never stored).
var skippedGroups = map[string]bool{"events.k8s.io": true, "metrics.k8s.io": true, "custom.metrics.k8s.io": true, "external.metrics.k8s.io": true}

// nsObject is an object found in a namespace.
type nsObject struct {
	kind string
	obj  unstructured.Unstructured
}

func (o nsObject) key() string { return o.kind + "/" + o.obj.GetName() }

// foreignIn lists what namespace ns holds that is not gpuctl's ("Kind name", sorted): every object
// of every namespaced kind the API server lists (discovery), but Events and Endpoints. gpuctl's are
// those whose UID is in ours (what the plan deletes, the record's objects, what an earlier look judged
// gpuctl's), the objects of its releases (Helm's ownership annotations), those releases' own storage
// Secrets, what Kubernetes puts in every namespace, and whatever has an owner reference to one of them
// (the EndpointSlices of a Service of theirs too, and the Secrets of a ServiceAccount, the Leases of
// the stack's controllers). The UIDs judged gpuctl's are added to ours, so a later look, when owners
// have gone, still knows their dependents. A kind it may not list is named as unreadable: it cannot
// say the namespace holds nothing else.
func (u *Uninstaller) foreignIn(ctx context.Context, ns string, ours map[types.UID]bool, rels []uninstallRelease) ([]string, error) {
	lists, err := discovery.ServerPreferredNamespacedResources(u.Clients.Discovery)
	var unreadable []string
	if err != nil {
		failed, ok := err.(*discovery.ErrGroupDiscoveryFailed)
		if !ok {
			return nil, fmt.Errorf("list the kinds the API server serves: %w", err)
		}
		for gv := range failed.Groups {
			if !skippedGroups[gv.Group] {
				unreadable = append(unreadable, "objects of "+gv.String()+" (its API did not answer)")
			}
		}
	}
	var objs []nsObject
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil || skippedGroups[gv.Group] {
			continue
		}
		for _, r := range l.APIResources {
			// Core Events are the events.k8s.io ones (one store). Core Endpoints are derived from
			// Services (the endpoints controller writes them; a selectorless Service's user writes them
			// next to the Service, which is listed), and listing them draws a deprecation warning from
			// Kubernetes 1.33 on.
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "delete") ||
				gv.Group == "" && (r.Name == "events" || r.Name == "endpoints") {
				continue
			}
			list, err := u.Clients.Dynamic.Resource(gv.WithResource(r.Name)).Namespace(ns).List(ctx, metav1.ListOptions{})
			switch {
			case kube.Absent(err) || apierrors.IsMethodNotSupported(err):
				continue // gone since discovery (a CRD --purge deleted)
			case apierrors.IsForbidden(err):
				unreadable = append(unreadable, r.Kind+" objects (you may not list them)")
				continue
			case err != nil:
				return nil, fmt.Errorf("list %s in namespace %s: %w", r.Name, ns, err)
			}
			for _, o := range list.Items {
				objs = append(objs, nsObject{kind: r.Kind, obj: o})
			}
		}
	}
	releases := map[string]bool{}
	for _, r := range rels {
		if r.namespace == ns {
			releases[r.name] = true
		}
	}
	// gpuctl's objects by "Kind/name" too: Endpoints, Secrets and Leases name theirs.
	oursByName := map[string]bool{}
	judge := func(o nsObject) bool {
		obj := &o.obj
		switch {
		case ours[obj.GetUID()], everyNamespace[o.key()]:
			return true
		case strings.HasPrefix(record.Provenance(withoutManagedFields(obj), releaseRefs(rels)), "release "):
			return true
		case slices.ContainsFunc(obj.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return ours[r.UID] }):
			return true
		}
		l, a := obj.GetLabels(), obj.GetAnnotations()
		switch o.kind {
		case "Secret":
			// Helm's storage of a release of gpuctl's (helm.sh/helm/v4 pkg/storage/driver/secrets.go), and
			// the token and pull Secrets of a ServiceAccount of gpuctl's or the platform's.
			return l["owner"] == "helm" && releases[l["name"]] ||
				a[corev1.ServiceAccountNameKey] != "" && (oursByName["ServiceAccount/"+a[corev1.ServiceAccountNameKey]] || everyNamespace["ServiceAccount/"+a[corev1.ServiceAccountNameKey]])
		case "EndpointSlice":
			return oursByName["Service/"+l["kubernetes.io/service-name"]]
		case "Lease":
			holder, _, _ := unstructured.NestedString(obj.Object, "spec", "holderIdentity")
			pod, _, _ := strings.Cut(holder, "_")
			return stackLeases[obj.GetName()] || pod != "" && oursByName["Pod/"+pod]
		}
		return false
	}
	// Until nothing changes: an owner may be listed after what it owns.
	left := objs
	for changed := true; changed; {
		changed = false
		var next []nsObject
		for _, o := range left {
			if judge(o) {
				ours[o.obj.GetUID()], oursByName[o.key()], changed = true, true, true
				continue
			}
			next = append(next, o)
		}
		left = next
	}
	foreign := unreadable
	for _, o := range left {
		foreign = append(foreign, o.kind+" "+o.obj.GetName())
	}
	slices.Sort(foreign)
	return foreign, nil
}
