package kube

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// schemaDiff is what narrowing found, each as a schema path "V.spec.x" and, in brackets, what theirs
// accepts there that ours would not.
type schemaDiff struct {
	// narrowed: versions, paths and types ours lacks or narrows.
	narrowed []string
	// tightened: value constraints ours adds or tightens (enum, null, required, pattern, format,
	// bounds, lengths and counts, list type, x-kubernetes-validations rules, …).
	tightened []finding
	// opened: subtrees theirs keeps as they come (x-kubernetes-preserve-unknown-fields, a map without
	// a value schema, an untyped value) that ours types. What ours would prune or refuse there depends
	// on what is stored, so only the stored objects can tell (storedLosses).
	opened []finding
}

// finding is one path of a schemaDiff and the version it is in.
type finding struct{ version, text string }

func (d schemaDiff) empty() bool {
	return len(d.narrowed) == 0 && len(d.tightened) == 0 && len(d.opened) == 0
}

func (d *schemaDiff) narrow(path, why string) { d.narrowed = append(d.narrowed, withWhy(path, why)) }

func (d *schemaDiff) tighten(version, path, why string) {
	d.tightened = append(d.tightened, finding{version, withWhy(path, why)})
}

func (d *schemaDiff) open(version, path string) { d.opened = append(d.opened, finding{version, path}) }

func withWhy(path, why string) string {
	if why == "" {
		return path
	}
	return path + " (" + why + ")"
}

// versions lists the versions of the given findings, sorted.
func versions(fs ...[]finding) []string {
	var out []string
	for _, f := range fs {
		for _, x := range f {
			if !slices.Contains(out, x.version) {
				out = append(out, x.version)
			}
		}
	}
	slices.Sort(out)
	return out
}

func texts(f []finding) []string {
	var out []string
	for _, x := range f {
		out = append(out, x.text)
	}
	return out
}

// narrowing compares what have accepts with what want would: "version V" for a served or stored
// version want lacks, else schema paths "V.spec.x.y" ("[]" for array items, ".*" for map values)
// with what want would reject there when the path itself exists: a narrower type (schemaDiff.narrowed),
// or a value constraint want adds or tightens: null, an enum value, a field want requires, a pattern,
// format, bound, length or count, multipleOf, list type or map keys, an x-kubernetes-validations rule
// (schemaDiff.tightened). Subtrees have leaves open and want types are listed apart (schemaDiff.opened).
func narrowing(have, want *apiextensionsv1.CustomResourceDefinition) schemaDiff {
	var d schemaDiff
	versions := map[string]*apiextensionsv1.CustomResourceDefinitionVersion{}
	for i := range want.Spec.Versions {
		if want.Spec.Versions[i].Served {
			versions[want.Spec.Versions[i].Name] = &want.Spec.Versions[i]
		}
	}
	for _, v := range have.Status.StoredVersions {
		if !slices.ContainsFunc(want.Spec.Versions, func(w apiextensionsv1.CustomResourceDefinitionVersion) bool { return w.Name == v }) {
			d.narrow("stored version "+v, "")
		}
	}
	for _, hv := range have.Spec.Versions {
		if !hv.Served {
			continue
		}
		wv, ok := versions[hv.Name]
		if !ok {
			d.narrow("version "+hv.Name, "")
			continue
		}
		if hv.Schema == nil || hv.Schema.OpenAPIV3Schema == nil || wv.Schema == nil || wv.Schema.OpenAPIV3Schema == nil {
			continue // no schema on our side accepts anything; none on theirs declares nothing
		}
		narrowSchema(hv.Schema.OpenAPIV3Schema, wv.Schema.OpenAPIV3Schema, hv.Name, hv.Name, &d)
	}
	return d
}

// narrowSchema compares the schema theirs with ours at path p of version v (see narrowing). A nil
// theirs is a value theirs keeps whatever it is (under x-kubernetes-preserve-unknown-fields).
func narrowSchema(theirs, ours *apiextensionsv1.JSONSchemaProps, v, p string, d *schemaDiff) {
	if acceptsAnything(ours) {
		return
	}
	if theirs == nil || acceptsAnything(theirs) {
		d.open(v, p)
		return
	}
	if why := typeNarrowed(theirs, ours); why != "" {
		d.narrow(p, why)
		return
	}
	if isOpen(theirs) && !isOpen(ours) {
		// Ours would prune what theirs kept here without declaring it.
		d.open(v, p)
	}
	if theirs.Nullable && !ours.Nullable {
		d.tighten(v, p, "null")
	}
	for _, why := range constraintsNarrowed(theirs, ours) {
		d.tighten(v, p, why)
	}
	narrowRequired(theirs, ours, v, p, d)
	narrowProperties(theirs, ours, v, p, d)
	narrowMapValues(theirs, ours, v, p, d)
	if theirs.Items != nil && theirs.Items.Schema != nil && ours.Items != nil && ours.Items.Schema != nil {
		narrowSchema(theirs.Items.Schema, ours.Items.Schema, v, p+"[]", d)
	}
}

// narrowRequired notes the fields at path p of version v that ours requires and theirs does not.
func narrowRequired(theirs, ours *apiextensionsv1.JSONSchemaProps, v, p string, d *schemaDiff) {
	for _, r := range ours.Required {
		// A required field with a default is always there: the API server fills it in on every read
		// and write (NVIDIADriver's spec.default from v26.7.0 on).
		if rp, ok := ours.Properties[r]; ok && rp.Default != nil {
			continue
		}
		if !slices.Contains(theirs.Required, r) {
			d.tighten(v, p+"."+r, "required by ours")
		}
	}
}

// narrowProperties compares the fields at path p of version v that either side declares, each with
// the other side's declaration of it or, where it has none, the schema of its map values.
func narrowProperties(theirs, ours *apiextensionsv1.JSONSchemaProps, v, p string, d *schemaDiff) {
	for _, name := range propertyNames(theirs, ours) {
		child := p + "." + name
		ts, os := fieldSchema(theirs, name), fieldSchema(ours, name)
		switch {
		case ts == nil && !isOpen(theirs):
			// Theirs prunes it: nothing is stored there.
		case ts == nil:
			// Theirs keeps it as it comes. Where ours prunes it, p itself is opened (narrowSchema).
			if os != nil && isOpen(ours) {
				narrowSchema(nil, os, v, child, d)
			}
		case os != nil:
			narrowSchema(ts, os, v, child, d)
		case isOpen(ours):
		default:
			d.narrow(child, "")
		}
	}
}

// propertyNames are the fields theirs or ours declares, sorted.
func propertyNames(theirs, ours *apiextensionsv1.JSONSchemaProps) []string {
	names := slices.Sorted(maps.Keys(theirs.Properties))
	for name := range ours.Properties {
		if _, ok := theirs.Properties[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// fieldSchema is the schema s gives its field name: the field's own, else that of s's map values,
// else nil (s declares no such field).
func fieldSchema(s *apiextensionsv1.JSONSchemaProps, name string) *apiextensionsv1.JSONSchemaProps {
	if f, ok := s.Properties[name]; ok {
		return &f
	}
	return mapValues(s)
}

// narrowMapValues compares theirs' map values at path p of version v (p.*) with ours'.
func narrowMapValues(theirs, ours *apiextensionsv1.JSONSchemaProps, v, p string, d *schemaDiff) {
	theirsMap, oursMap := mapValues(theirs), mapValues(ours)
	if theirsMap == nil {
		return
	}
	child := p + ".*"
	switch {
	case oursMap != nil:
		narrowSchema(theirsMap, oursMap, v, child, d)
	case isOpen(ours):
	default:
		d.narrow(child, "")
	}
}

func mapValues(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		return s.AdditionalProperties.Schema
	}
	return nil
}

// isOpen: the schema keeps fields it does not declare.
func isOpen(s *apiextensionsv1.JSONSchemaProps) bool {
	return (s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields) ||
		(s.AdditionalProperties != nil && s.AdditionalProperties.Allows && s.AdditionalProperties.Schema == nil)
}

// acceptsAnything: the schema keeps any value, of any type, as it is.
func acceptsAnything(s *apiextensionsv1.JSONSchemaProps) bool {
	return isOpen(s) && s.Type == "" && !s.XIntOrString && !s.XEmbeddedResource && len(s.Properties) == 0 &&
		mapValues(s) == nil && len(s.Enum) == 0 && len(s.XValidations) == 0 &&
		len(s.AllOf) == 0 && len(s.AnyOf) == 0 && len(s.OneOf) == 0 && s.Not == nil
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
		// An untyped subtree of theirs that declares something (an embedded resource) declares
		// nothing to compare here; one that declares nothing is opened (see narrowSchema).
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

// constraintsNarrowed says, one phrase each, which of ours' value constraints at one schema node
// reject values theirs' accept: "ours adds X" where theirs has none, "X; ours: Y" where ours
// tightens it. A constraint ours drops or loosens is not reported.
func constraintsNarrowed(theirs, ours *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	out = append(out, enumNarrowed(theirs, ours)...)
	out = append(out, valueConstraintsNarrowed(theirs, ours)...)
	out = append(out, sizesNarrowed(theirs, ours)...)
	if ours.UniqueItems && !theirs.UniqueItems {
		out = append(out, "ours adds uniqueItems")
	}
	if why := listNarrowed(theirs, ours); why != "" {
		out = append(out, why)
	}
	if ours.XEmbeddedResource && !theirs.XEmbeddedResource {
		out = append(out, "ours adds x-kubernetes-embedded-resource")
	}
	out = append(out, rulesAdded(theirs, ours)...)
	out = append(out, combinatorsChanged(theirs, ours)...)
	return out
}

// constraintChanged is the phrase for a constraint what that ours sets to o: "ours adds what o" where
// theirs has none (t is ""), "what t; ours: o" where theirs has t.
func constraintChanged(what, t, o string) string {
	if t == "" {
		return "ours adds " + what + " " + o
	}
	return what + " " + t + "; ours: " + o
}

// enumNarrowed says what ours' enum refuses: any value where theirs has no enum, else each value of
// theirs' enum that ours' lacks.
func enumNarrowed(theirs, ours *apiextensionsv1.JSONSchemaProps) []string {
	if len(ours.Enum) == 0 {
		return nil
	}
	if len(theirs.Enum) == 0 {
		return []string{"any value; ours has an enum"}
	}
	allowed := map[string]bool{}
	for _, e := range ours.Enum {
		allowed[string(e.Raw)] = true
	}
	var out []string
	for _, e := range theirs.Enum {
		if !allowed[string(e.Raw)] {
			out = append(out, "value "+string(e.Raw))
		}
	}
	return out
}

// valueConstraintsNarrowed says which of ours' constraints on a single value (pattern, enforced
// format, minimum, maximum, multipleOf) refuse values theirs' accept.
func valueConstraintsNarrowed(theirs, ours *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	if ours.Pattern != "" && ours.Pattern != theirs.Pattern {
		out = append(out, constraintChanged("pattern", quoteIf(clip(theirs.Pattern, 40)), strconv.Quote(clip(ours.Pattern, 40))))
	}
	if of := enforcedFormat(ours); of != "" && of != enforcedFormat(theirs) {
		out = append(out, constraintChanged("format", quoteIf(enforcedFormat(theirs)), strconv.Quote(of)))
	}
	if tighterBound(theirs.Minimum, theirs.ExclusiveMinimum, ours.Minimum, ours.ExclusiveMinimum, 1) {
		out = append(out, constraintChanged("minimum", bound(theirs.Minimum, theirs.ExclusiveMinimum), bound(ours.Minimum, ours.ExclusiveMinimum)))
	}
	if tighterBound(theirs.Maximum, theirs.ExclusiveMaximum, ours.Maximum, ours.ExclusiveMaximum, -1) {
		out = append(out, constraintChanged("maximum", bound(theirs.Maximum, theirs.ExclusiveMaximum), bound(ours.Maximum, ours.ExclusiveMaximum)))
	}
	if m := ours.MultipleOf; m != nil && *m != 0 {
		if t := theirs.MultipleOf; t == nil || *t == 0 || math.Remainder(*t, *m) != 0 {
			out = append(out, constraintChanged("multipleOf", floatIf(theirs.MultipleOf), floatIf(m)))
		}
	}
	return out
}

// sizesNarrowed says which of ours' lengths and counts (of a string, a list, an object's
// properties) refuse values theirs' accept.
func sizesNarrowed(theirs, ours *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	for _, c := range []struct {
		what   string
		t, o   *int64
		higher bool // a higher value is tighter (a minimum)
	}{
		{"minLength", theirs.MinLength, ours.MinLength, true},
		{"maxLength", theirs.MaxLength, ours.MaxLength, false},
		{"minItems", theirs.MinItems, ours.MinItems, true},
		{"maxItems", theirs.MaxItems, ours.MaxItems, false},
		{"minProperties", theirs.MinProperties, ours.MinProperties, true},
		{"maxProperties", theirs.MaxProperties, ours.MaxProperties, false},
	} {
		if c.o == nil || c.higher && *c.o == 0 {
			continue
		}
		if c.t == nil || c.higher && *c.o > *c.t || !c.higher && *c.o < *c.t {
			out = append(out, constraintChanged(c.what, intIf(c.t), strconv.FormatInt(*c.o, 10)))
		}
	}
	return out
}

// listNarrowed says how ours' list type refuses lists theirs' accepts, or "".
func listNarrowed(theirs, ours *apiextensionsv1.JSONSchemaProps) string {
	tl, ol := listType(theirs), listType(ours)
	switch {
	case ol != "atomic" && ol != tl:
		// A set refuses duplicates, a map items that share their keys; an atomic list refuses neither.
		return fmt.Sprintf("list-type %s; ours: %s", tl, ol)
	case ol == "map" && !subset(theirs.XListMapKeys, ours.XListMapKeys):
		// Items unique by theirs' keys are unique by any superset of them, not by other keys.
		return fmt.Sprintf("list-map-keys %v; ours: %v", theirs.XListMapKeys, ours.XListMapKeys)
	}
	return ""
}

// rulesAdded says which x-kubernetes-validations rules ours has that theirs does not.
func rulesAdded(theirs, ours *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	for _, r := range ours.XValidations {
		// A rule is judged by its expression (its message and reason change nothing it accepts);
		// optionalOldSelf changes when a transition rule runs.
		if !slices.ContainsFunc(theirs.XValidations, func(t apiextensionsv1.ValidationRule) bool {
			return t.Rule == r.Rule && optional(t.OptionalOldSelf) == optional(r.OptionalOldSelf)
		}) {
			out = append(out, "ours adds rule "+strconv.Quote(clip(r.Rule, 60)))
		}
	}
	return out
}

// combinatorsChanged says which of allOf, anyOf, oneOf and not ours sets differently from theirs.
func combinatorsChanged(theirs, ours *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	for _, c := range []struct {
		what string
		t, o any
	}{{"allOf", theirs.AllOf, ours.AllOf}, {"anyOf", theirs.AnyOf, ours.AnyOf}, {"oneOf", theirs.OneOf, ours.OneOf}, {"not", theirs.Not, ours.Not}} {
		// These hold value validations only (structural schemas); any change may refuse a value.
		if o, _ := json.Marshal(c.o); string(o) != "null" && string(o) != "[]" {
			if t, _ := json.Marshal(c.t); string(t) != string(o) {
				out = append(out, "ours changes "+c.what)
			}
		}
	}
	return out
}

// enforcedFormat is the schema's format if the API server validates it, else "" (it ignores formats
// it does not know, as of its compatibility version).
func enforcedFormat(s *apiextensionsv1.JSONSchemaProps) string {
	if s.Format == "" {
		return ""
	}
	o := &spec.Schema{SchemaProps: spec.SchemaProps{Format: s.Format}}
	if s.Type != "" {
		o.Type = spec.StringOrArray{s.Type}
	}
	if err := validation.StripUnsupportedFormatsPostProcessorForVersion(environment.DefaultCompatibilityVersion())(o); err != nil {
		return s.Format
	}
	return o.Format
}

// tighterBound reports whether ours' bound (o, oex) refuses a value theirs' (t, tex) accepts; sign
// is 1 for a minimum, -1 for a maximum.
func tighterBound(t *float64, tex bool, o *float64, oex bool, sign float64) bool {
	switch {
	case o == nil:
		return false
	case t == nil:
		return true
	case *o*sign > *t*sign:
		return true
	}
	return *o == *t && oex && !tex
}

func bound(v *float64, exclusive bool) string {
	if v == nil {
		return ""
	}
	s := strconv.FormatFloat(*v, 'g', -1, 64)
	if exclusive {
		s = "exclusive " + s
	}
	return s
}

func listType(s *apiextensionsv1.JSONSchemaProps) string {
	if s.XListType == nil || *s.XListType == "" {
		return "atomic"
	}
	return *s.XListType
}

// subset reports whether every element of a is in b.
func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func optional(b *bool) bool { return b != nil && *b }

func quoteIf(s string) string {
	if s == "" {
		return ""
	}
	return strconv.Quote(s)
}

func floatIf(v *float64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}

func intIf(v *int64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatInt(*v, 10)
}

// clip shortens s to n runes, marking the cut.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
