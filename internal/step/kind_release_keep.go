package step

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
)

// helmResourcePolicy is Helm's resource policy annotation: an object annotated keep is left in place
// by an upgrade whose new manifest lacks it, and by an uninstall (helm.sh/helm/v4 v4.3.1
// pkg/kube/client.go, Update; pkg/action/uninstall.go).
const helmResourcePolicy = "helm.sh/resource-policy"

// keepSubchart carries out a release step's KeptSubchart before the release is upgraded: each object
// of the subchart that the deployed manifest has and the new rendering (a) does not gets keep and
// gpuctl's mark. It returns what to add to the step's message.
func (x *executor) keepSubchart(ctx context.Context, s *plan.Step, a *release.Apply) (string, error) {
	k := s.Release.KeepSubchart
	if k == nil {
		return "", nil
	}
	deployed, err := a.Client.Manifest(k.Release)
	if err != nil {
		return "", err
	}
	p, err := a.Client.PreviewApply(ctx, a.Name, a.Chart, a.Values)
	if err != nil {
		return "", err
	}
	objs, err := subchartObjects(deployed, p.Manifest, k)
	if err != nil {
		return "", err
	}
	var kept []string
	for _, o := range objs {
		if err := x.annotate(ctx, o, map[string]any{helmResourcePolicy: "keep", plan.KeptFromAnnotation: k.Release}); err != nil {
			return "", fmt.Errorf("keep %s %s of release %s's %s subchart: %w", o.GetKind(), o.GetName(), k.Release, k.Chart, err)
		}
		kept = append(kept, o.GetKind()+" "+o.GetName())
	}
	if len(kept) == 0 {
		return "", nil
	}
	return fmt.Sprintf("; kept %d objects of its %s subchart running outside the release: %s", len(kept), k.Chart, strings.Join(kept, ", ")), nil
}

// subchartObjects are the objects of the deployed manifest that k's subchart rendered (its
// helm.sh/chart label names the chart, or its app.kubernetes.io/name label is the chart's) and the
// new manifest does not render (same group, kind, namespace and name).
func subchartObjects(deployed, next string, k *plan.KeptSubchart) ([]*unstructured.Unstructured, error) {
	old, err := render.DecodeManifest(deployed)
	if err != nil {
		return nil, err
	}
	now, err := render.DecodeManifest(next)
	if err != nil {
		return nil, err
	}
	key := func(o *unstructured.Unstructured) string {
		ns := o.GetNamespace()
		if ns == "" {
			ns = k.Namespace
		}
		return o.GroupVersionKind().GroupKind().String() + " " + ns + "/" + o.GetName()
	}
	rendered := map[string]bool{}
	for _, o := range now {
		rendered[key(o)] = true
	}
	var out []*unstructured.Unstructured
	for _, o := range old {
		l := o.GetLabels()
		ofChart := strings.HasPrefix(l["helm.sh/chart"], k.Chart+"-") || l["app.kubernetes.io/name"] == k.Chart
		if !ofChart || rendered[key(o)] {
			continue
		}
		if o.GetNamespace() == "" {
			o.SetNamespace(k.Namespace)
		}
		out = append(out, o)
	}
	return out, nil
}

// annotate merge-patches o's annotations (nil removes one) as gpuctl's field manager.
func (x *executor) annotate(ctx context.Context, o *unstructured.Unstructured, annotations map[string]any) error {
	ri, err := x.resource(o)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	_, err = ri.Patch(ctx, o.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: kube.FieldManager})
	return err
}

// resource is the dynamic client of o's kind, in its namespace where the kind is namespaced.
func (x *executor) resource(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	m, err := x.clients.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return x.clients.Dynamic.Resource(m.Resource).Namespace(o.GetNamespace()), nil
	}
	return x.clients.Dynamic.Resource(m.Resource), nil
}
