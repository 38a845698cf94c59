package release

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
)

// The marks a GitOps engine leaves on the objects it manages.
const (
	// FluxNameLabel and FluxNamespaceLabel name the HelmRelease: Flux helm-controller's post-renderer
	// labels every object it renders with them, "<group>/name" and "<group>/namespace" of the API group
	// helm.toolkit.fluxcd.io (https://github.com/fluxcd/helm-controller/blob/v1.4.0/internal/postrender/build.go,
	// NewOriginLabels; internal/postrender/common_renderer.go, originLabels), and the CRDs it applies too
	// (internal/action/crds.go). The labels are in the manifest Helm stores for the release, and on the
	// objects in the cluster.
	FluxNameLabel      = "helm.toolkit.fluxcd.io/name"
	FluxNamespaceLabel = "helm.toolkit.fluxcd.io/namespace"
	// ArgoCDTrackingAnnotation is Argo CD's resource tracking by annotation, the default since Argo CD
	// v3.0 (https://github.com/argoproj/argo-cd/blob/v3.5.7/util/settings/settings.go, GetTrackingMethod):
	// "<app>:<group>/<kind>:<namespace>/<name>" (util/argo/resource_tracking.go, BuildAppInstanceValue),
	// where <app> is the Application's name, or "<namespace>_<name>" for an Application outside Argo CD's
	// own namespace (pkg/apis/application/v1alpha1/types.go, InstanceName). Argo CD renders charts
	// itself (helm template): what it manages has no Helm release of its own, only this annotation.
	//
	// Argo CD's older label tracking (app.kubernetes.io/instance, opt-in since v3.0) is not read: Helm
	// charts set that same label to the release's name (NVIDIA's and NFD's charts do), so every release
	// gpuctl installs carries it and it would call each of them Argo CD's.
	ArgoCDTrackingAnnotation = "argocd.argoproj.io/tracking-id"
)

// Owner is the GitOps engine's object that manages a release or an object: the place to change it.
type Owner struct {
	// Engine is "Flux" or "Argo CD"; Kind its object's kind (HelmRelease, Application).
	Engine    string `json:"engine"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

func (o Owner) String() string {
	s := o.Engine + " " + o.Kind + " "
	if o.Namespace != "" {
		s += o.Namespace + "/"
	}
	return s + o.Name
}

// ExportFor is gpuctl export's --for that writes the engine's objects.
func (o Owner) ExportFor() string {
	if o.Engine == "Flux" {
		return "flux"
	}
	return "argocd"
}

// OwnedError: gpuctl was asked to write something a GitOps engine manages. Nothing was written; the
// change belongs in the engine's object.
type OwnedError struct {
	// Object is what gpuctl would have written: "release gpu-operator/gpu-operator", "ClusterPolicy cluster-policy".
	Object string `json:"object"`
	Owner  Owner  `json:"owner"`
	// Marked is the object that carries the engine's mark, when it is not Object itself
	// ("Deployment gpu-operator/gpu-operator" of a release).
	Marked string `json:"marked,omitempty"`
}

func (e *OwnedError) Error() string {
	return fmt.Sprintf("%s is managed by %s: change it there (gpuctl export --for %s writes it)", e.Object, e.Owner, e.Owner.ExportFor())
}

// ObjectID is an object as Argo CD's tracking annotation names it.
type ObjectID struct {
	Group, Kind, Namespace, Name string
}

// OwnerOf reads the engine's marks on an object's metadata (labels, annotations) and says who manages
// it. Argo CD's tracking annotation counts only when it names the object itself: Argo CD ignores one
// that was copied onto another object (https://github.com/argoproj/argo-cd/blob/v3.5.7/controller/state.go,
// isSelfReferencedObj), and so does gpuctl. A cluster-scoped object's annotation names the
// Application's destination namespace, which any namespace matches.
func OwnerOf(id ObjectID, labels, annotations map[string]string) (Owner, bool) {
	if name := labels[FluxNameLabel]; name != "" && labels[FluxNamespaceLabel] != "" {
		return Owner{Engine: "Flux", Kind: "HelmRelease", Namespace: labels[FluxNamespaceLabel], Name: name}, true
	}
	app, ok := parseTrackingID(annotations[ArgoCDTrackingAnnotation])
	if !ok || app.id.Group != id.Group || app.id.Kind != id.Kind || app.id.Name != id.Name ||
		(id.Namespace != "" && app.id.Namespace != id.Namespace) {
		return Owner{}, false
	}
	o := Owner{Engine: "Argo CD", Kind: "Application", Name: app.name}
	if ns, name, found := strings.Cut(app.name, "_"); found {
		o.Namespace, o.Name = ns, name
	}
	return o, true
}

type trackingID struct {
	name string
	id   ObjectID
}

// parseTrackingID reads "<app>:<group>/<kind>:<namespace>/<name>" as Argo CD does
// (util/argo/resource_tracking.go@v3.5.7, ParseAppInstanceValue).
func parseTrackingID(v string) (trackingID, bool) {
	parts := strings.SplitN(v, ":", 3)
	if len(parts) != 3 || parts[0] == "" {
		return trackingID{}, false
	}
	gk := strings.Split(parts[1], "/")
	nn := strings.Split(parts[2], "/")
	if len(gk) != 2 || len(nn) != 2 {
		return trackingID{}, false
	}
	return trackingID{name: parts[0], id: ObjectID{Group: gk[0], Kind: gk[1], Namespace: nn[0], Name: nn[1]}}, true
}

// Owner says which GitOps engine manages release name: an engine's mark on an object of its newest
// revision, in the manifest Helm stored (Flux's labels are there) or on the object in the cluster (an
// engine that took the objects over). nil when no engine does, or there is no such release.
func (c *Client) Owner(name string) (*OwnedError, error) {
	r, err := c.last(name)
	if err != nil || r == nil {
		return nil, err
	}
	infos, err := c.cfg.KubeClient.Build(strings.NewReader(r.Manifest), false)
	if err != nil {
		return nil, fmt.Errorf("read the manifest of release %s: %w", name, err)
	}
	o, marked, err := ownerOfObjects(infos, func(info *resource.Info) error { return info.Get() })
	if err != nil || o == nil {
		return nil, err
	}
	return &OwnedError{Object: "release " + c.namespace + "/" + name, Owner: *o, Marked: marked}, nil
}

// ownerOfObjects is the first owner marked on an object of infos, as stored and then as get reads it
// from the cluster (an object that is gone is skipped), with the object that carries the mark.
func ownerOfObjects(infos []*resource.Info, get func(*resource.Info) error) (*Owner, string, error) {
	for _, info := range infos {
		if o, ok := infoOwner(info); ok {
			return &o, describe(info), nil
		}
		err := get(info)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("read %s: %w", describe(info), err)
		}
		if o, ok := infoOwner(info); ok {
			return &o, describe(info), nil
		}
	}
	return nil, "", nil
}

func infoOwner(info *resource.Info) (Owner, bool) {
	if info.Object == nil {
		return Owner{}, false
	}
	m, err := meta.Accessor(info.Object)
	if err != nil {
		return Owner{}, false
	}
	var gvk schema.GroupVersionKind
	if info.Mapping != nil {
		gvk = info.Mapping.GroupVersionKind
	} else {
		gvk = info.Object.GetObjectKind().GroupVersionKind()
	}
	return OwnerOf(ObjectID{Group: gvk.Group, Kind: gvk.Kind, Namespace: info.Namespace, Name: info.Name}, m.GetLabels(), m.GetAnnotations())
}
