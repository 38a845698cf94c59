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
	"k8s.io/client-go/dynamic"
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
//     every property path and its type, and every value: no enum value dropped, no null, no field
//     required that it does not require (unless ours defaults it), no pattern, format, bound,
//     length, count, list type or x-kubernetes-validations rule added or tightened. A path under a
//     subtree ours leaves open (x-kubernetes-preserve-unknown-fields, a map's additionalProperties)
//     is accepted. Where it leaves a subtree open and ours types it, ours would prune or refuse
//     whatever there it does not declare, so that is judged by the objects stored: ours replaces it
//     only if the API server would prune nothing from them and refuse none of them (storedLosses;
//     gpuctl's own former hand-written CRDs had such subtrees). Otherwise it is kept, and the reason
//     names the tool and the first paths, or the objects, ours would lose.
//   - And ours must not be an older release's. A foreign CRD carries no release stamp: Helm installs a
//     chart's crds/ without release labels or annotations (so meta.helm.sh/release-name is not there to
//     lead to a release), NVIDIA's upgrade hook applies the bare files, and the
//     controller-gen.kubebuilder.io/version annotation names the generator, not the release (NVIDIA's
//     v25.10.1 CRDs say v0.18.0, its v26.7.0 CRDs v0.21.0; gpuctl generates every release with v0.21.0).
//     The sound signal is the schema itself: when Releases is given, a foreign CRD that accepts
//     exactly what a known release's CRD accepts is that release's (descriptions aside, NVIDIA's chart
//     CRDs are what `make crds` generates from the same api/), and it is kept when that release is
//     newer than Version. When it is older, ours is its upgrade, as NVIDIA's chart upgrade does it:
//     value constraints ours tightens do not keep it (v26.7.0 adds a minimum and an
//     x-kubernetes-validations rule to v26.3.3's), unless a stored object would be refused. A schema
//     no known release has is judged by narrowing alone: a newer release adds paths (each of
//     v25.10.1 → v26.3.3 → v26.7.0 did), which ours then lacks.
//   - Stamped by gpuctl for Version or an older release, and changed by nobody else since: applied,
//     even where ours drops what the older release had (an upgrade, as NVIDIA's own chart does it).
type ApplyCRDs struct {
	Client apiextensionsclient.Interface
	CRDs   []*apiextensionsv1.CustomResourceDefinition
	// Version is the bundle version written to CRDVersionAnnotation (e.g. "v26.7.0").
	Version string
	// Releases holds the CRDs of every release this gpuctl knows, by version ("v26.3.3"), to recognise
	// a foreign CRD as one of them (see above). Nil: foreign CRDs are judged by their schemas only.
	Releases map[string][]*apiextensionsv1.CustomResourceDefinition
	// Dynamic reads the stored objects of a CRD where ours types a subtree a foreign CRD leaves open
	// (see storedLosses). Nil: such a CRD is kept.
	Dynamic dynamic.Interface
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
	var stored storedCheck
	if a.Dynamic != nil {
		stored = func(ctx context.Context, have, want *apiextensionsv1.CustomResourceDefinition, versions []string) ([]string, error) {
			return storedLosses(ctx, a.Dynamic, have, want, versions)
		}
	}
	reason, err := keepReason(ctx, have, want, a.Version, a.Releases, stored)
	if err != nil {
		return CRDResult{}, err
	}
	if reason != "" {
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
	reason = ""
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

// storedCheck names what the stored objects of want's kind would lose or have refused once want
// replaces have, read in the given versions (storedLosses, or a fake in tests).
type storedCheck func(ctx context.Context, have, want *apiextensionsv1.CustomResourceDefinition, versions []string) ([]string, error)

// keepReason says why want must not be applied over have (the ApplyCRDs rule), or "" when it may.
// stored is asked only when nothing else decides: want types a subtree have leaves open, or tightens
// a value of a known older release's CRD; nil keeps have then.
func keepReason(ctx context.Context, have, want *apiextensionsv1.CustomResourceDefinition, ours string, releases map[string][]*apiextensionsv1.CustomResourceDefinition, stored storedCheck) (string, error) {
	stamp := have.Annotations[CRDVersionAnnotation]
	if stamp != "" && ours != "" && newer(stamp, ours) {
		return fmt.Sprintf("installed by gpuctl for %s, newer than %s", stamp, ours), nil
	}
	writers := specWritersSinceGpuctl(have)
	if stamp != "" && len(writers) == 0 {
		return "", nil
	}
	who := "another tool"
	if len(writers) > 0 {
		who = strings.Join(writers, ", ")
	}
	if stamp != "" {
		who = fmt.Sprintf("gpuctl for %s, then changed by %s", stamp, who)
	}
	d := narrowing(have, want)
	rel := ""
	if ours != "" {
		rel = identify(have, releases)
	}
	// A known older release's CRD is upgraded to ours as NVIDIA's own chart upgrade does it, even
	// where ours tightens a value constraint (v26.7.0 adds x-kubernetes-validations rules and bounds
	// to v26.3.3's), as long as no stored object would be refused.
	upgrade := rel != "" && newer(ours, rel)
	if len(d.narrowed) > 0 || len(d.tightened) > 0 && !upgrade {
		return keptBecause(who, ours, slices.Concat(d.narrowed, texts(d.tightened))), nil
	}
	if rel != "" && newer(rel, ours) {
		return fmt.Sprintf("installed by %s; it is the %s release's CRD, newer than ours (%s)", who, rel, ours), nil
	}
	if len(d.tightened) == 0 && len(d.opened) == 0 {
		return "", nil
	}
	if stored == nil {
		lost := texts(d.tightened)
		for _, o := range d.opened {
			lost = append(lost, o.text+" (left open; ours types it)")
		}
		return keptBecause(who, ours, lost) + " (stored objects not checked)", nil
	}
	lost, err := stored(ctx, have, want, versions(d.tightened, d.opened))
	if err != nil {
		return "", fmt.Errorf("check stored objects: %w", err)
	}
	if len(lost) > 0 {
		if len(lost) > 3 {
			lost = append(lost[:3:3], fmt.Sprintf("and %d more", len(lost)-3))
		}
		return fmt.Sprintf("installed by %s; ours (%s) could drop or refuse what is stored: %s", who, orUnknown(ours), strings.Join(lost, ", ")), nil
	}
	return "", nil
}

// keptBecause is the reason a CRD installed by who is kept: the first three of what it accepts
// that ours would not.
func keptBecause(who, ours string, narrowed []string) string {
	if len(narrowed) > 3 {
		narrowed = append(narrowed[:3:3], fmt.Sprintf("and %d more", len(narrowed)-3))
	}
	return fmt.Sprintf("installed by %s; it accepts what ours (%s) would not: %s", who, orUnknown(ours), strings.Join(narrowed, ", "))
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

// identify returns the release whose CRD of the same name accepts exactly what have accepts, or ""
// (no such release, or several that disagree about being newer: the oldest is returned).
func identify(have *apiextensionsv1.CustomResourceDefinition, releases map[string][]*apiextensionsv1.CustomResourceDefinition) string {
	var match []string
	for version, crds := range releases {
		for _, c := range crds {
			if c.Name == have.Name && sameVersions(have, c) && narrowing(have, c).empty() && narrowing(c, have).empty() {
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

// CRDListWatch lists and watches the one CRD named, for waits built on watchtools.UntilWithSync.
func CRDListWatch(client apiextensionsclient.Interface, name string) *cache.ListWatch {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return client.ApiextensionsV1().CustomResourceDefinitions().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return client.ApiextensionsV1().CustomResourceDefinitions().Watch(ctx, o)
		},
	}
}

// WaitCRDEstablished waits, with a watch, until the API server serves the CRD.
func WaitCRDEstablished(ctx context.Context, client apiextensionsclient.Interface, name string) error {
	_, err := watchtools.UntilWithSync(ctx, CRDListWatch(client, name), &apiextensionsv1.CustomResourceDefinition{}, nil, func(ev watch.Event) (bool, error) {
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
