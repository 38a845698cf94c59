package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// CRDVersionAnnotation carries the version of the bundle a gpuctl-applied CRD came from, so a later
// gpuctl can tell an upgrade from a downgrade.
const CRDVersionAnnotation = "gpuctl.io/bundle-version"

// CRDAction says what ApplyCRDs did with one CRD.
type CRDAction string

const (
	CRDCreated   CRDAction = "created"
	CRDUpdated   CRDAction = "updated"
	CRDUnchanged CRDAction = "unchanged"
	// CRDKept: the installed CRD was left alone because applying ours would downgrade it (Reason says why).
	CRDKept CRDAction = "kept"
	// CRDWouldCreate and CRDWouldUpdate: dry run.
	CRDWouldCreate CRDAction = "would-create"
	CRDWouldUpdate CRDAction = "would-update"
)

// CRDResult is the outcome for one CRD.
type CRDResult struct {
	Name   string    `json:"name"`
	Action CRDAction `json:"action"`
	Reason string    `json:"reason,omitempty"`
}

// ApplyCRDs server-side applies CRDs before a Helm install or upgrade, because Helm installs a chart's
// crds/ only once and never upgrades them — the cause of "unknown field … ClusterPolicy.spec" after an
// operator upgrade (shared/seeds/002). It never downgrades: a CRD whose recorded bundle version is
// newer than ours, or (for one another tool installed) whose schema accepts fields ours would drop, is
// kept as it is and reported.
type ApplyCRDs struct {
	Client apiextensionsclient.Interface
	CRDs   []*apiextensionsv1.CustomResourceDefinition
	// Version is the bundle version written to CRDVersionAnnotation (e.g. "v26.7.0").
	Version string
	DryRun  bool
}

// Run applies every CRD and waits until each is Established.
func (a *ApplyCRDs) Run(ctx context.Context) ([]CRDResult, error) {
	var out []CRDResult
	for _, crd := range a.CRDs {
		res, err := a.applyOne(ctx, crd)
		if err != nil {
			return out, fmt.Errorf("apply CRD %s: %w", crd.Name, err)
		}
		out = append(out, res)
	}
	if a.DryRun {
		return out, nil
	}
	for _, r := range out {
		if r.Action == CRDKept {
			continue
		}
		if err := WaitCRDEstablished(ctx, a.Client, r.Name); err != nil {
			return out, err
		}
	}
	return out, nil
}

func (a *ApplyCRDs) applyOne(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (CRDResult, error) {
	want := crd.DeepCopy()
	want.TypeMeta = metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}
	if want.Annotations == nil {
		want.Annotations = map[string]string{}
	}
	if a.Version != "" {
		want.Annotations[CRDVersionAnnotation] = a.Version
	}
	crds := a.Client.ApiextensionsV1().CustomResourceDefinitions()
	have, err := crds.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if a.DryRun {
			return CRDResult{Name: want.Name, Action: CRDWouldCreate}, nil
		}
		if _, err := a.apply(ctx, want, false); err != nil {
			return CRDResult{}, err
		}
		return CRDResult{Name: want.Name, Action: CRDCreated}, nil
	case err != nil:
		return CRDResult{}, err
	}
	if reason := downgradeReason(have, want, a.Version); reason != "" {
		return CRDResult{Name: want.Name, Action: CRDKept, Reason: reason}, nil
	}
	// A server-side dry run tells exactly whether our apply would change the stored object: the API
	// server defaults both sides the same way, which a client-side comparison cannot do.
	trial, err := a.apply(ctx, want, true)
	if err != nil {
		return CRDResult{}, err
	}
	if trial.Generation == have.Generation && mapsEqual(trial.Annotations, have.Annotations) && mapsEqual(trial.Labels, have.Labels) {
		return CRDResult{Name: want.Name, Action: CRDUnchanged}, nil
	}
	if a.DryRun {
		return CRDResult{Name: want.Name, Action: CRDWouldUpdate}, nil
	}
	if _, err := a.apply(ctx, want, false); err != nil {
		return CRDResult{}, err
	}
	reason := ""
	if m := otherManagers(have); len(m) > 0 {
		reason = "took over fields from " + strings.Join(m, ", ")
	}
	return CRDResult{Name: want.Name, Action: CRDUpdated, Reason: reason}, nil
}

func (a *ApplyCRDs) apply(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, dryRun bool) (*apiextensionsv1.CustomResourceDefinition, error) {
	body, err := json.Marshal(crd)
	if err != nil {
		return nil, err
	}
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: ptr(true)}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return a.Client.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crd.Name, types.ApplyPatchType, body, opts)
}

// downgradeReason says why applying want over have would be a downgrade, or "" when it would not.
func downgradeReason(have, want *apiextensionsv1.CustomResourceDefinition, ours string) string {
	if theirs := have.Annotations[CRDVersionAnnotation]; theirs != "" && ours != "" {
		tv, err1 := semver.NewVersion(theirs)
		ov, err2 := semver.NewVersion(ours)
		if err1 == nil && err2 == nil && tv.GreaterThan(ov) {
			return fmt.Sprintf("installed by gpuctl for %s, newer than %s", theirs, ours)
		}
		return ""
	}
	// Installed by someone else (NVIDIA's chart, OLM, kubectl): upgrade it only if ours accepts every
	// field it accepts.
	missing := missingFields(have, want)
	if len(missing) == 0 {
		return ""
	}
	if len(missing) > 3 {
		missing = append(missing[:3], fmt.Sprintf("and %d more", len(missing)-3))
	}
	by := otherManagers(have)
	who := "another tool"
	if len(by) > 0 {
		who = strings.Join(by, ", ")
	}
	return fmt.Sprintf("installed by %s with fields this gpuctl's CRD lacks (%s): it looks newer", who, strings.Join(missing, ", "))
}

// missingFields lists schema paths have's served versions accept that want's do not.
func missingFields(have, want *apiextensionsv1.CustomResourceDefinition) []string {
	var missing []string
	for _, hv := range have.Spec.Versions {
		if !hv.Served || hv.Schema == nil || hv.Schema.OpenAPIV3Schema == nil {
			continue
		}
		var wv *apiextensionsv1.CustomResourceDefinitionVersion
		for i := range want.Spec.Versions {
			if want.Spec.Versions[i].Name == hv.Name {
				wv = &want.Spec.Versions[i]
			}
		}
		if wv == nil {
			missing = append(missing, "version "+hv.Name)
			continue
		}
		if wv.Schema == nil || wv.Schema.OpenAPIV3Schema == nil {
			continue
		}
		accepted := map[string]bool{}
		open := map[string]bool{}
		schemaPaths(wv.Schema.OpenAPIV3Schema, hv.Name, accepted, open)
		theirs := map[string]bool{}
		schemaPaths(hv.Schema.OpenAPIV3Schema, hv.Name, theirs, map[string]bool{})
		for _, p := range slices.Sorted(maps.Keys(theirs)) {
			if !accepted[p] && !coveredByOpen(p, open) {
				missing = append(missing, p)
			}
		}
	}
	return missing
}

func schemaPaths(s *apiextensionsv1.JSONSchemaProps, prefix string, paths, open map[string]bool) {
	if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
		open[prefix] = true
	}
	for name, p := range s.Properties {
		child := prefix + "." + name
		paths[child] = true
		schemaPaths(&p, child, paths, open)
	}
	if s.Items != nil && s.Items.Schema != nil {
		schemaPaths(s.Items.Schema, prefix+"[]", paths, open)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		open[prefix] = true
	}
}

func coveredByOpen(p string, open map[string]bool) bool {
	for o := range open {
		if strings.HasPrefix(p, o+".") || strings.HasPrefix(p, o+"[]") {
			return true
		}
	}
	return false
}

// otherManagers names the field managers other than gpuctl that own parts of the object.
func otherManagers(obj *apiextensionsv1.CustomResourceDefinition) []string {
	seen := map[string]bool{}
	for _, m := range obj.ManagedFields {
		if m.Manager != FieldManager && m.Manager != "" && m.Manager != "kube-apiserver" {
			seen[m.Manager] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// WaitCRDEstablished waits, with a watch, until the API server serves the CRD.
func WaitCRDEstablished(ctx context.Context, client apiextensionsclient.Interface, name string) error {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return client.ApiextensionsV1().CustomResourceDefinitions().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return client.ApiextensionsV1().CustomResourceDefinitions().Watch(ctx, o)
		},
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &apiextensionsv1.CustomResourceDefinition{}, nil, func(ev watch.Event) (bool, error) {
		crd, ok := ev.Object.(*apiextensionsv1.CustomResourceDefinition)
		if !ok {
			return false, nil
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established: %w", name, err)
	}
	return nil
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func ptr[T any](v T) *T { return &v }
