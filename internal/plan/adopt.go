package plan

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/gpuctl/gpuctl/internal/detect"
)

// Adopted is what the engine read of the release --adopt takes over: a GPU operator Helm release of
// gpuctl's name in the install namespace that gpuctl did not write (no gpuctl.io/managed label).
type Adopted struct {
	Release *detect.HelmRelease
	// User are the values its newest revision was given (`helm get values`), All those merged over
	// its chart's defaults (`helm get values --all`).
	User, All map[string]any
}

// Adoption is the plan's account of a release --adopt takes over: whose it was, which of its values
// the install keeps and which it changes.
type Adoption struct {
	Release      string `json:"release"`
	Namespace    string `json:"namespace"`
	Revision     int    `json:"revision"`
	Chart        string `json:"chart,omitempty"`
	ChartVersion string `json:"chartVersion,omitempty"`
	// Source names the values layer that carries the release's own values (above the detected facts,
	// below -f and --set).
	Source string `json:"source"`
	// Kept are the release's own values (dotted keys) the install keeps as they are.
	Kept []string `json:"kept,omitempty"`
	// Changes are the values the release ran with that the install changes.
	Changes []ValueChange `json:"changes,omitempty"`
	// NFDSubchart: the release ran NFD as its subchart, which keeps running as it is, outside any
	// release (KeptSubchart); gpuctl uses it and installs no NFD of its own.
	NFDSubchart bool `json:"nfdSubchart,omitempty"`
	// Values are the adopted layer's values as planned: the install record keeps them for upgrades.
	Values map[string]any `json:"-"`
}

// ValueChange is one value the install changes: From is what the release ran with, To what it gets.
type ValueChange struct {
	Key  string `json:"key"`
	From any    `json:"from"`
	To   any    `json:"to"`
	// Source is the values layer To comes from.
	Source string `json:"source,omitempty"`
}

// AdoptedSource names the values layer of an adopted release's own values.
func AdoptedSource(ns, name string) string {
	return fmt.Sprintf("adopted release %s/%s (its values, helm get values %s -n %s)", ns, name, name, ns)
}

// ours: h is the release gpuctl installs by that name into the install namespace, and it is gpuctl's
// by proof (its gpuctl.io/managed label) or by --adopt, or the plan is only rendered (Options.Render).
// A release of gpuctl's name without either is someone else's: gpuctl never upgrades it.
func (b *builder) ours(h *detect.HelmRelease, name string) bool {
	if h == nil || h.Name != name || h.Namespace != b.o.Namespace {
		return false
	}
	return h.Gpuctl || b.adopting(h) || b.o.Render
}

// adopting: --adopt takes h over.
func (b *builder) adopting(h *detect.HelmRelease) bool {
	a := b.in.Adopt
	return a != nil && a.Release != nil && h != nil && a.Release.Name == h.Name && a.Release.Namespace == h.Namespace
}

// nfdInAdopted: NFD runs as the subchart of the release --adopt takes over.
func (b *builder) nfdInAdopted() bool {
	n := b.det.Existing.NFD
	return n.Present && b.adopting(n.Helm) && n.OLM == nil
}

// addAdoptedLayer adds the adopted release's own values as a layer above the detected facts and below
// gpuctl's flags, -f and --set (its node-feature-discovery section goes to gpuctl's NFD release, as
// from a -f file) and returns the layer's source ("" when
// nothing is adopted).
func (b *builder) addAdoptedLayer(l *releaseLayers) string {
	var source string
	var values map[string]any
	switch a := b.in.Adopt; {
	case a != nil && a.Release != nil:
		source, values = AdoptedSource(a.Release.Namespace, a.Release.Name), clone(a.User)
	case b.o.AdoptedValues != nil:
		source, values = b.o.AdoptedValues.Source, clone(b.o.AdoptedValues.Values)
	default:
		if b.o.Adopt {
			b.warn("--adopt: nothing to take over: no GPU operator Helm release " + OperatorRelease + " in namespace " + b.o.Namespace + " that gpuctl did not install")
		}
		return ""
	}
	// nfd.enabled turned NFD on in NVIDIA's chart; gpuctl runs NFD as its own release, so the detected
	// fact (false) stands.
	if nfd, ok := values["nfd"].(map[string]any); ok {
		nfd = clone(nfd)
		delete(nfd, "enabled")
		values["nfd"] = nfd
	}
	l.addSplit(source, values)
	b.adoptedLayer = &Layer{Source: source, Values: values}
	return source
}

// adoption is the plan's Adoption of the release --adopt takes over, once the operator release's
// values are known: every value the release ran with that the install sets differently, and which
// of its own values stay.
func (b *builder) adoption(source string, op *Release) *Adoption {
	a := b.in.Adopt
	if a == nil || a.Release == nil {
		return nil
	}
	r := a.Release
	out := &Adoption{Release: r.Name, Namespace: r.Namespace, Revision: r.Revision, Chart: r.Chart, ChartVersion: r.ChartVersion,
		Source: source, NFDSubchart: b.nfdInAdopted()}
	if b.adoptedLayer != nil {
		out.Values = b.adoptedLayer.Values
	}
	was := leaves(a.All)
	if len(was) == 0 {
		was = leaves(a.User)
	}
	now := leaves(op.Values)
	for _, k := range slices.Sorted(maps.Keys(now)) {
		if old, ok := was[k]; ok && !reflect.DeepEqual(normalizedValue(old), normalizedValue(now[k])) {
			out.Changes = append(out.Changes, ValueChange{Key: k, From: old, To: now[k], Source: layerOf(op.Layers, k)})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(leaves(a.User))) {
		if !slices.ContainsFunc(out.Changes, func(c ValueChange) bool { return c.Key == k }) && !strings.HasPrefix(k, NFDKey+".") {
			out.Kept = append(out.Kept, k)
		}
	}
	return out
}

// NFDKey is the section of the operator chart's values that NVIDIA's chart hands to its NFD subchart.
const NFDKey = "node-feature-discovery"

// leaves flattens values to dotted keys; a list is one leaf.
func leaves(v map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(key, sub)
				continue
			}
			out[key] = v
		}
	}
	walk("", v)
	return out
}

// normalizedValue makes values from YAML, JSON and Go literals compare equal (1 and 1.0, []any and
// []map[string]any).
func normalizedValue(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(data, &out) != nil {
		return v
	}
	return out
}

// layerOf is the source of the highest layer that sets the dotted key k.
func layerOf(layers []Layer, k string) string {
	for i := len(layers) - 1; i >= 0; i-- {
		if _, ok := leaves(layers[i].Values)[k]; ok {
			return layers[i].Source
		}
		// A list or map set whole above k's own key.
		for p := k; strings.Contains(p, "."); {
			p = p[:strings.LastIndex(p, ".")]
			if _, ok := leaves(layers[i].Values)[p]; ok {
				return layers[i].Source
			}
		}
	}
	return "chart default"
}

// refuseOthersOperator refuses to plan over a GPU operator gpuctl cannot prove is its own (its
// release label) and --adopt does not take over: two operators would fight over the same
// ClusterPolicy and nodes, and upgrading someone else's release with gpuctl's chart and values would
// change a working stack behind its owner's back.
func (b *builder) refuseOthersOperator() error {
	op := b.det.Existing.GPUOperator
	if !op.Present || (op.OLM == nil && b.ours(op.Helm, OperatorRelease)) {
		return nil
	}
	if h := op.Helm; h != nil && op.OLM == nil {
		return fmt.Errorf("a GPU operator gpuctl did not install is present (%s, without gpuctl's release label %s): gpuctl will not change it; %s",
			describeRelease(h), detect.ManagedReleaseLabel, AdoptHint(h, b.o.Namespace))
	}
	return refuseSecondOperator(op, false)
}

// AdoptHint says what to do with a GPU operator Helm release gpuctl did not install: --adopt takes it
// over where gpuctl can (its name, in the install namespace ns); elsewhere why it cannot.
func AdoptHint(h *detect.HelmRelease, ns string) string {
	keep := fmt.Sprintf("keep managing it with Helm, or uninstall it first (helm uninstall %s -n %s)", h.Name, h.Namespace)
	switch {
	case h.Name != OperatorRelease:
		return fmt.Sprintf("gpuctl can take over only a release named %s (Helm cannot rename one): %s", OperatorRelease, keep)
	case h.Namespace != ns:
		return fmt.Sprintf("to let gpuctl take it over, keeping its values, run gpuctl install -n %s --adopt; or %s", h.Namespace, keep)
	}
	return "to let gpuctl take it over, keeping its values (helm get values " + h.Name + " -n " + h.Namespace + ") under your -f and --set, run gpuctl install --adopt (--dry-run shows what changes); or " + keep
}

// describeRelease names a Helm release with its state and chart.
func describeRelease(h *detect.HelmRelease) string {
	s := fmt.Sprintf("Helm release %s/%s", h.Namespace, h.Name)
	var parts []string
	if h.Status != "" {
		parts = append(parts, h.Status)
	}
	if h.Chart != "" {
		parts = append(parts, "chart "+h.Chart+" "+h.ChartVersion)
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

// keepSubchart marks the operator release of an adoption whose release ran NFD as its subchart
// (KeptSubchart).
func (b *builder) keepSubchart(op *Release) {
	if b.p.Adoption == nil || !b.p.Adoption.NFDSubchart || op == nil {
		return
	}
	op.KeepSubchart = &KeptSubchart{Release: op.Name, Namespace: op.Namespace, Chart: NFDKey}
}
