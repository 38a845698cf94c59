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
// operator upgrade. It never narrows or downgrades a CRD that is there; such a CRD is kept as it is
// (CRDKept, with the reason). The rule, for a CRD that exists:
//
//   - Stamped by gpuctl (CRDVersionAnnotation) for a newer release than Version: kept.
//   - Written by another tool: no stamp, or a field manager other than gpuctl changed its spec after
//     gpuctl's last apply (NVIDIA's chart, its manage-crds upgrade hook, OLM, kubectl). Ours replaces
//     it only if ours accepts everything it accepts (see narrowing): every served and stored version,
//     every property path, each path's type, enum values and null, and no field required that it
//     does not require (unless ours defaults it). A path under a subtree ours leaves open
//     (x-kubernetes-preserve-unknown-fields, a map's additionalProperties) is accepted. A subtree it
//     leaves open and ours types declares no paths, so nothing there counts as missing (gpuctl's own
//     former hand-written CRDs had such subtrees). Otherwise it is kept, and the reason names the tool
//     and the first paths ours would lose.
//   - And ours must not be an older release's. A foreign CRD carries no release stamp: Helm installs a
//     chart's crds/ without release labels or annotations (so meta.helm.sh/release-name is not there to
//     lead to a release), NVIDIA's upgrade hook applies the bare files, and the
//     controller-gen.kubebuilder.io/version annotation names the generator, not the release (NVIDIA's
//     v25.10.1 CRDs say v0.18.0, its v26.7.0 CRDs v0.21.0; gpuctl generates every release with v0.21.0).
//     The sound signal is the schema itself: when Releases is given, a foreign CRD that accepts
//     exactly what a known release's CRD accepts is that release's (descriptions aside, NVIDIA's chart
//     CRDs are what `make crds` generates from the same api/), and it is kept when that release is
//     newer than Version. A schema no known release has is judged by narrowing alone: a newer release
//     adds paths (each of v25.10.1 → v26.3.3 → v26.7.0 did), which ours then lacks.
//   - Stamped by gpuctl for Version or an older release, and changed by nobody else since: applied,
//     even where ours drops what the older release had (an upgrade, as NVIDIA's own chart does it).
type ApplyCRDs struct {
	Client apiextensionsclient.Interface
	CRDs   []*apiextensionsv1.CustomResourceDefinition
	// Version is the bundle version written to CRDVersionAnnotation (e.g. "v26.7.0").
	Version string
	// Releases holds the CRDs of every release this gpuctl knows, by version ("v26.3.3"), to recognise
	// a foreign CRD as one of them (see above). Nil: foreign CRDs are judged by their schema paths only.
	Releases map[string][]*apiextensionsv1.CustomResourceDefinition
	DryRun   bool
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
	if reason := keepReason(have, want, a.Version, a.Releases); reason != "" {
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

// keepReason says why want must not be applied over have (the ApplyCRDs rule), or "" when it may.
func keepReason(have, want *apiextensionsv1.CustomResourceDefinition, ours string, releases map[string][]*apiextensionsv1.CustomResourceDefinition) string {
	stamp := have.Annotations[CRDVersionAnnotation]
	if stamp != "" && ours != "" && newer(stamp, ours) {
		return fmt.Sprintf("installed by gpuctl for %s, newer than %s", stamp, ours)
	}
	writers := specWritersSinceGpuctl(have)
	if stamp != "" && len(writers) == 0 {
		return ""
	}
	who := "another tool"
	if len(writers) > 0 {
		who = strings.Join(writers, ", ")
	}
	if stamp != "" {
		who = fmt.Sprintf("gpuctl for %s, then changed by %s", stamp, who)
	}
	if narrowed := narrowing(have, want); len(narrowed) > 0 {
		if len(narrowed) > 3 {
			narrowed = append(narrowed[:3], fmt.Sprintf("and %d more", len(narrowed)-3))
		}
		return fmt.Sprintf("installed by %s; it accepts what ours (%s) would not: %s", who, orUnknown(ours), strings.Join(narrowed, ", "))
	}
	if ours == "" {
		return ""
	}
	if rel := identify(have, releases); rel != "" && newer(rel, ours) {
		return fmt.Sprintf("installed by %s; it is the %s release's CRD, newer than ours (%s)", who, rel, ours)
	}
	return ""
}

func orUnknown(v string) string {
	if v == "" {
		return "unversioned"
	}
	return v
}

// newer reports whether version a is a newer semantic version than b (false when either does not parse).
func newer(a, b string) bool {
	av, err1 := semver.NewVersion(a)
	bv, err2 := semver.NewVersion(b)
	return err1 == nil && err2 == nil && av.GreaterThan(bv)
}

// specWritersSinceGpuctl names the field managers other than gpuctl that own part of the CRD's spec
// and wrote it after gpuctl's last apply (all of them when gpuctl never applied it). A manager that
// set the same values before gpuctl's forced apply still co-owns them, but the schema is gpuctl's.
func specWritersSinceGpuctl(obj *apiextensionsv1.CustomResourceDefinition) []string {
	var ours *metav1.Time
	for _, m := range obj.ManagedFields {
		if m.Manager == FieldManager && m.Time != nil && (ours == nil || m.Time.After(ours.Time)) {
			ours = m.Time
		}
	}
	seen := map[string]bool{}
	for _, m := range obj.ManagedFields {
		if m.Manager == FieldManager || m.Manager == "" || m.Manager == "kube-apiserver" || m.Subresource != "" || !ownsSpec(m) {
			continue
		}
		if ours != nil && (m.Time == nil || !m.Time.After(ours.Time)) {
			continue
		}
		seen[m.Manager] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

func ownsSpec(m metav1.ManagedFieldsEntry) bool {
	if m.FieldsV1 == nil {
		return false
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(m.FieldsV1.Raw, &top); err != nil {
		return true // unreadable: assume the worst
	}
	_, ok := top["f:spec"]
	return ok
}

// narrowing lists what have accepts that want would not (empty: want accepts everything have does):
// "version V" for a served or stored version want lacks, else schema paths "V.spec.x.y" ("[]" for
// array items, ".*" for map values) with what want would reject there when the path itself exists.
func narrowing(have, want *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	versions := map[string]*apiextensionsv1.CustomResourceDefinitionVersion{}
	for i := range want.Spec.Versions {
		if want.Spec.Versions[i].Served {
			versions[want.Spec.Versions[i].Name] = &want.Spec.Versions[i]
		}
	}
	for _, v := range have.Status.StoredVersions {
		if !slices.ContainsFunc(want.Spec.Versions, func(w apiextensionsv1.CustomResourceDefinitionVersion) bool { return w.Name == v }) {
			out = append(out, "stored version "+v)
		}
	}
	for _, hv := range have.Spec.Versions {
		if !hv.Served {
			continue
		}
		wv, ok := versions[hv.Name]
		if !ok {
			out = append(out, "version "+hv.Name)
			continue
		}
		if hv.Schema == nil || hv.Schema.OpenAPIV3Schema == nil || wv.Schema == nil || wv.Schema.OpenAPIV3Schema == nil {
			continue // no schema on our side accepts anything; none on theirs declares nothing
		}
		narrowSchema(hv.Schema.OpenAPIV3Schema, wv.Schema.OpenAPIV3Schema, hv.Name, &out)
	}
	return out
}

// narrowSchema compares the schema theirs with ours at path p (see narrowing).
func narrowSchema(theirs, ours *apiextensionsv1.JSONSchemaProps, p string, out *[]string) {
	if isOpen(ours) && ours.Type == "" && len(ours.Properties) == 0 {
		return // anything goes
	}
	if why := typeNarrowed(theirs, ours); why != "" {
		*out = append(*out, p+" ("+why+")")
		return
	}
	if theirs.Nullable && !ours.Nullable {
		*out = append(*out, p+" (null)")
	}
	if len(ours.Enum) > 0 {
		if len(theirs.Enum) == 0 {
			*out = append(*out, p+" (any value; ours has an enum)")
		} else {
			allowed := map[string]bool{}
			for _, e := range ours.Enum {
				allowed[string(e.Raw)] = true
			}
			for _, e := range theirs.Enum {
				if !allowed[string(e.Raw)] {
					*out = append(*out, p+" (value "+string(e.Raw)+")")
				}
			}
		}
	}
	for _, r := range ours.Required {
		// A required field with a default is always there: the API server fills it in on every read
		// and write (NVIDIADriver's spec.default from v26.7.0 on).
		if rp, ok := ours.Properties[r]; ok && rp.Default != nil {
			continue
		}
		if !slices.Contains(theirs.Required, r) {
			*out = append(*out, p+"."+r+" (required by ours)")
		}
	}
	var oursMap *apiextensionsv1.JSONSchemaProps
	if ours.AdditionalProperties != nil && ours.AdditionalProperties.Schema != nil {
		oursMap = ours.AdditionalProperties.Schema
	}
	for _, name := range slices.Sorted(maps.Keys(theirs.Properties)) {
		tp := theirs.Properties[name]
		child := p + "." + name
		switch op, ok := ours.Properties[name]; {
		case ok:
			narrowSchema(&tp, &op, child, out)
		case oursMap != nil:
			narrowSchema(&tp, oursMap, child, out)
		case isOpen(ours):
		default:
			*out = append(*out, child)
		}
	}
	if theirs.AdditionalProperties != nil && theirs.AdditionalProperties.Schema != nil {
		child := p + ".*"
		switch {
		case oursMap != nil:
			narrowSchema(theirs.AdditionalProperties.Schema, oursMap, child, out)
		case isOpen(ours):
		default:
			*out = append(*out, child)
		}
	}
	if theirs.Items != nil && theirs.Items.Schema != nil && ours.Items != nil && ours.Items.Schema != nil {
		narrowSchema(theirs.Items.Schema, ours.Items.Schema, p+"[]", out)
	}
}

// isOpen: the schema keeps fields it does not declare.
func isOpen(s *apiextensionsv1.JSONSchemaProps) bool {
	return (s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields) ||
		(s.AdditionalProperties != nil && s.AdditionalProperties.Allows && s.AdditionalProperties.Schema == nil)
}

// typeNarrowed says how ours' type rejects values theirs' accepts, or "".
func typeNarrowed(theirs, ours *apiextensionsv1.JSONSchemaProps) string {
	switch {
	case ours.XIntOrString:
		if theirs.XIntOrString || theirs.Type == "integer" || theirs.Type == "string" {
			return ""
		}
	case ours.Type == "":
		return ""
	case theirs.XIntOrString:
		return "integer or string; ours: " + ours.Type
	case theirs.Type == "" || theirs.Type == ours.Type || theirs.Type == "integer" && ours.Type == "number":
		// An untyped subtree of theirs declares nothing to compare (see ApplyCRDs).
		return ""
	}
	t := theirs.Type
	if theirs.XIntOrString {
		t = "integer or string"
	}
	o := ours.Type
	if ours.XIntOrString {
		o = "integer or string"
	}
	return fmt.Sprintf("%s; ours: %s", t, o)
}

// identify returns the release whose CRD of the same name accepts exactly what have accepts, or ""
// (no such release, or several that disagree about being newer: the oldest is returned).
func identify(have *apiextensionsv1.CustomResourceDefinition, releases map[string][]*apiextensionsv1.CustomResourceDefinition) string {
	var match []string
	for version, crds := range releases {
		for _, c := range crds {
			if c.Name == have.Name && sameVersions(have, c) && len(narrowing(have, c)) == 0 && len(narrowing(c, have)) == 0 {
				match = append(match, version)
			}
		}
	}
	if len(match) == 0 {
		return ""
	}
	slices.SortFunc(match, func(a, b string) int {
		switch {
		case newer(a, b):
			return 1
		case newer(b, a):
			return -1
		}
		return strings.Compare(a, b)
	})
	return match[0]
}

func sameVersions(a, b *apiextensionsv1.CustomResourceDefinition) bool {
	names := func(c *apiextensionsv1.CustomResourceDefinition) []string {
		var out []string
		for _, v := range c.Spec.Versions {
			if v.Served {
				out = append(out, v.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(names(a), names(b))
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
		if ctx.Err() != nil {
			// watchtools reports any end of its context as "timed out waiting for the condition";
			// an interrupt must stay an interrupt (context.Canceled) for the caller.
			err = ctx.Err()
		}
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
