package kube

import (
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestNarrowing compares one field's schema, spec.f, as the installed CRD (theirs) and ours have it:
// each constraint ours adds or tightens is reported once, with the path and what changes, and each
// that ours keeps, drops or loosens is not.
func TestNarrowing(t *testing.T) {
	yes := true
	f64 := func(v float64) *float64 { return &v }
	i64 := func(v int64) *int64 { return &v }
	s := func(mod func(*apiextensionsv1.JSONSchemaProps)) apiextensionsv1.JSONSchemaProps {
		p := apiextensionsv1.JSONSchemaProps{Type: "string"}
		mod(&p)
		return p
	}
	typed := func(typ string, mod func(*apiextensionsv1.JSONSchemaProps)) apiextensionsv1.JSONSchemaProps {
		p := apiextensionsv1.JSONSchemaProps{Type: typ}
		mod(&p)
		return p
	}
	none := func(*apiextensionsv1.JSONSchemaProps) {}
	pattern := func(p string) func(*apiextensionsv1.JSONSchemaProps) {
		return func(s *apiextensionsv1.JSONSchemaProps) { s.Pattern = p }
	}
	format := func(f string) func(*apiextensionsv1.JSONSchemaProps) {
		return func(s *apiextensionsv1.JSONSchemaProps) { s.Format = f }
	}
	minimum := func(v float64, exclusive bool) func(*apiextensionsv1.JSONSchemaProps) {
		return func(s *apiextensionsv1.JSONSchemaProps) { s.Minimum, s.ExclusiveMinimum = f64(v), exclusive }
	}
	maximum := func(v float64, exclusive bool) func(*apiextensionsv1.JSONSchemaProps) {
		return func(s *apiextensionsv1.JSONSchemaProps) { s.Maximum, s.ExclusiveMaximum = f64(v), exclusive }
	}
	rules := func(rs ...string) func(*apiextensionsv1.JSONSchemaProps) {
		return func(s *apiextensionsv1.JSONSchemaProps) {
			for _, r := range rs {
				s.XValidations = append(s.XValidations, apiextensionsv1.ValidationRule{Rule: r, Message: "m " + r})
			}
		}
	}
	list := func(listType string, keys ...string) apiextensionsv1.JSONSchemaProps {
		l := apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": str(), "ns": str()},
		}}}
		if listType != "" {
			l.XListType = &listType
		}
		l.XListMapKeys = keys
		return l
	}
	openObject := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &yes}
	anyValue := apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: &yes}
	typedObject := object(map[string]apiextensionsv1.JSONSchemaProps{"enabled": {Type: "boolean"}})
	openTypedObject := object(map[string]apiextensionsv1.JSONSchemaProps{"enabled": {Type: "boolean"}})
	openTypedObject.XPreserveUnknownFields = &yes
	freeMap := apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true}}
	stringMap := apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}}

	for _, tc := range []struct {
		name         string
		theirs, ours apiextensionsv1.JSONSchemaProps
		narrowed     []string // the reasons, exactly
		tightened    []string
		opened       []string
	}{
		{"the same schema is not narrowed", s(pattern("^v")), s(pattern("^v")), nil, nil, nil},

		{"a pattern ours adds is reported", str(), s(pattern("^v")), nil, []string{`v1.spec.f (ours adds pattern "^v")`}, nil},
		{"a pattern ours changes is reported", s(pattern("^a")), s(pattern("^v")), nil, []string{`v1.spec.f (pattern "^a"; ours: "^v")`}, nil},
		{"a pattern ours drops is not", s(pattern("^v")), str(), nil, nil, nil},

		{"a format the API server checks, added by ours, is reported", str(), s(format("date-time")), nil, []string{`v1.spec.f (ours adds format "date-time")`}, nil},
		{"a format ours changes is reported", s(format("ipv4")), s(format("cidr")), nil, []string{`v1.spec.f (format "ipv4"; ours: "cidr")`}, nil},
		{"a format the API server ignores is not", str(), s(format("semver")), nil, nil, nil},
		{"a format ours drops is not", s(format("uri")), str(), nil, nil, nil},

		{"a minimum ours adds is reported", typed("integer", none), typed("integer", minimum(0, false)), nil, []string{"v1.spec.f (ours adds minimum 0)"}, nil},
		{"a higher minimum is reported", typed("integer", minimum(0, false)), typed("integer", minimum(1, false)), nil, []string{"v1.spec.f (minimum 0; ours: 1)"}, nil},
		{"the same minimum made exclusive is reported", typed("number", minimum(0, false)), typed("number", minimum(0, true)), nil, []string{"v1.spec.f (minimum 0; ours: exclusive 0)"}, nil},
		{"a lower minimum is not", typed("integer", minimum(1, false)), typed("integer", minimum(0, false)), nil, nil, nil},
		{"an exclusive minimum made inclusive is not", typed("number", minimum(0, true)), typed("number", minimum(0, false)), nil, nil, nil},
		{"a lower maximum is reported", typed("integer", maximum(10, false)), typed("integer", maximum(5, false)), nil, []string{"v1.spec.f (maximum 10; ours: 5)"}, nil},
		{"the same maximum made exclusive is reported", typed("integer", maximum(10, false)), typed("integer", maximum(10, true)), nil, []string{"v1.spec.f (maximum 10; ours: exclusive 10)"}, nil},
		{"a higher maximum is not", typed("integer", maximum(5, false)), typed("integer", maximum(10, false)), nil, nil, nil},
		{"a maximum ours drops is not", typed("integer", maximum(5, true)), typed("integer", none), nil, nil, nil},
		{"a multipleOf theirs' multiples do not all meet is reported", typed("integer", func(s *apiextensionsv1.JSONSchemaProps) { s.MultipleOf = f64(2) }),
			typed("integer", func(s *apiextensionsv1.JSONSchemaProps) { s.MultipleOf = f64(4) }), nil, []string{"v1.spec.f (multipleOf 2; ours: 4)"}, nil},
		{"a multipleOf that divides theirs is not", typed("integer", func(s *apiextensionsv1.JSONSchemaProps) { s.MultipleOf = f64(4) }),
			typed("integer", func(s *apiextensionsv1.JSONSchemaProps) { s.MultipleOf = f64(2) }), nil, nil, nil},

		{"a maxLength ours adds is reported", str(), s(func(s *apiextensionsv1.JSONSchemaProps) { s.MaxLength = i64(63) }), nil, []string{"v1.spec.f (ours adds maxLength 63)"}, nil},
		{"a higher minLength is reported", s(func(s *apiextensionsv1.JSONSchemaProps) { s.MinLength = i64(1) }), s(func(s *apiextensionsv1.JSONSchemaProps) { s.MinLength = i64(3) }),
			nil, []string{"v1.spec.f (minLength 1; ours: 3)"}, nil},
		{"a minLength of 0 is no constraint", str(), s(func(s *apiextensionsv1.JSONSchemaProps) { s.MinLength = i64(0) }), nil, nil, nil},
		{"a longer maxLength is not", s(func(s *apiextensionsv1.JSONSchemaProps) { s.MaxLength = i64(10) }), s(func(s *apiextensionsv1.JSONSchemaProps) { s.MaxLength = i64(20) }), nil, nil, nil},
		{"a lower maxItems is reported", typed("array", func(s *apiextensionsv1.JSONSchemaProps) { s.MaxItems = i64(8) }), typed("array", func(s *apiextensionsv1.JSONSchemaProps) { s.MaxItems = i64(4) }),
			nil, []string{"v1.spec.f (maxItems 8; ours: 4)"}, nil},
		{"a minItems ours adds is reported", typed("array", none), typed("array", func(s *apiextensionsv1.JSONSchemaProps) { s.MinItems = i64(1) }), nil, []string{"v1.spec.f (ours adds minItems 1)"}, nil},
		{"a minItems ours drops is not", typed("array", func(s *apiextensionsv1.JSONSchemaProps) { s.MinItems = i64(1) }), typed("array", none), nil, nil, nil},
		{"a maxProperties ours adds is reported", typed("object", none), typed("object", func(s *apiextensionsv1.JSONSchemaProps) { s.MaxProperties = i64(5) }), nil, []string{"v1.spec.f (ours adds maxProperties 5)"}, nil},
		{"a higher minProperties is reported", typed("object", func(s *apiextensionsv1.JSONSchemaProps) { s.MinProperties = i64(1) }), typed("object", func(s *apiextensionsv1.JSONSchemaProps) { s.MinProperties = i64(2) }),
			nil, []string{"v1.spec.f (minProperties 1; ours: 2)"}, nil},
		{"uniqueItems ours adds is reported", typed("array", none), typed("array", func(s *apiextensionsv1.JSONSchemaProps) { s.UniqueItems = true }), nil, []string{"v1.spec.f (ours adds uniqueItems)"}, nil},

		{"an enum that appears is reported", str(), str("a", "b"), nil, []string{"v1.spec.f (any value; ours has an enum)"}, nil},
		{"an enum that drops a value is reported", str("a", "b"), str("a"), nil, []string{`v1.spec.f (value "b")`}, nil},
		{"an enum ours widens is not", str("a"), str("a", "b"), nil, nil, nil},
		{"an enum ours drops is not", str("a"), str(), nil, nil, nil},

		{"null ours no longer takes is reported", typed("string", func(s *apiextensionsv1.JSONSchemaProps) { s.Nullable = true }), str(), nil, []string{"v1.spec.f (null)"}, nil},
		{"null ours takes now is not", str(), typed("string", func(s *apiextensionsv1.JSONSchemaProps) { s.Nullable = true }), nil, nil, nil},

		{"a field ours requires is reported", object(map[string]apiextensionsv1.JSONSchemaProps{"a": str()}), object(map[string]apiextensionsv1.JSONSchemaProps{"a": str()}, "a"),
			nil, []string{"v1.spec.f.a (required by ours)"}, nil},
		{"a field ours no longer requires is not", object(map[string]apiextensionsv1.JSONSchemaProps{"a": str()}, "a"), object(map[string]apiextensionsv1.JSONSchemaProps{"a": str()}), nil, nil, nil},

		{"a rule ours adds is reported", typed("object", none), typed("object", rules("self.a > 0")), nil, []string{`v1.spec.f (ours adds rule "self.a > 0")`}, nil},
		{"a rule ours changes is reported", typed("object", rules("self.a > 0")), typed("object", rules("self.a > 1")), nil, []string{`v1.spec.f (ours adds rule "self.a > 1")`}, nil},
		{"a rule ours removes is not", typed("object", rules("self.a > 0", "self.b > 0")), typed("object", rules("self.a > 0")), nil, nil, nil},
		{"a rule whose message alone changes is not", typed("object", rules("self.a > 0")),
			typed("object", func(s *apiextensionsv1.JSONSchemaProps) {
				s.XValidations = []apiextensionsv1.ValidationRule{{Rule: "self.a > 0", Message: "a must be positive"}}
			}), nil, nil, nil},
		{"a transition rule made to run on create is reported", typed("string", func(s *apiextensionsv1.JSONSchemaProps) {
			s.XValidations = []apiextensionsv1.ValidationRule{{Rule: "!has(oldSelf) || self == oldSelf", OptionalOldSelf: &yes}}
		}), typed("string", func(s *apiextensionsv1.JSONSchemaProps) {
			s.XValidations = []apiextensionsv1.ValidationRule{{Rule: "!has(oldSelf) || self == oldSelf"}}
		}), nil, []string{`v1.spec.f (ours adds rule "!has(oldSelf) || self == oldSelf")`}, nil},
		{"a long rule is cut", typed("object", none), typed("object", rules("self.a.startsWith('a') || self.a.startsWith('b') || self.a.startsWith('c')")),
			nil, []string{`v1.spec.f (ours adds rule "self.a.startsWith('a') || self.a.startsWith('b') || self.a.…")`}, nil},

		{"an atomic list made a set is reported", list(""), list("set"), nil, []string{"v1.spec.f (list-type atomic; ours: set)"}, nil},
		{"an atomic list made a map is reported", list("atomic"), list("map", "name"), nil, []string{"v1.spec.f (list-type atomic; ours: map)"}, nil},
		{"a map list keyed by fewer keys is reported", list("map", "name", "ns"), list("map", "name"), nil, []string{"v1.spec.f (list-map-keys [name ns]; ours: [name])"}, nil},
		{"a map list keyed by more keys is not", list("map", "name"), list("map", "ns", "name"), nil, nil, nil},
		{"a set made atomic is not", list("set"), list("atomic"), nil, nil, nil},

		{"an embedded resource ours declares is reported", typed("object", func(s *apiextensionsv1.JSONSchemaProps) { s.XPreserveUnknownFields = &yes }),
			typed("object", func(s *apiextensionsv1.JSONSchemaProps) { s.XPreserveUnknownFields, s.XEmbeddedResource = &yes, true }),
			nil, []string{"v1.spec.f (ours adds x-kubernetes-embedded-resource)"}, nil},
		{"an anyOf ours adds is reported", typed("object", none), typed("object", func(s *apiextensionsv1.JSONSchemaProps) {
			s.AnyOf = []apiextensionsv1.JSONSchemaProps{{Required: []string{"a"}}, {Required: []string{"b"}}}
		}), nil, []string{"v1.spec.f (ours changes anyOf)"}, nil},

		{"an integer-or-string made a string is narrowed", apiextensionsv1.JSONSchemaProps{XIntOrString: true}, str(), []string{"v1.spec.f (integer or string; ours: string)"}, nil, nil},
		{"a string made an integer-or-string is not", str(), apiextensionsv1.JSONSchemaProps{XIntOrString: true}, nil, nil, nil},
		{"a field ours lacks is narrowed", object(map[string]apiextensionsv1.JSONSchemaProps{"a": str(), "b": str()}), object(map[string]apiextensionsv1.JSONSchemaProps{"a": str()}),
			[]string{"v1.spec.f.b"}, nil, nil},
		{"a constraint on a map's values is reported at .*",
			apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
			apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: i64(5)}}},
			nil, []string{"v1.spec.f.* (ours adds maxLength 5)"}, nil},
		{"a constraint on array items is reported at []", apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
			apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string", Pattern: "^v"}}},
			nil, []string{`v1.spec.f[] (ours adds pattern "^v")`}, nil},
		{"a property ours declares where theirs has a map is compared with the map's values", stringMap,
			object(map[string]apiextensionsv1.JSONSchemaProps{"a": s(pattern("^v"))}), []string{"v1.spec.f.*"}, []string{`v1.spec.f.a (ours adds pattern "^v")`}, nil},

		{"an object theirs keeps as it comes and ours types is opened", openObject, typedObject, nil, nil, []string{"v1.spec.f"}},
		{"a field ours declares under an object both keep open is opened", openObject, openTypedObject, nil, nil, []string{"v1.spec.f.enabled"}},
		{"a map without a value schema that ours gives one is opened", freeMap, stringMap, nil, nil, []string{"v1.spec.f"}},
		{"a value of any type that ours types is opened", anyValue, str(), nil, nil, []string{"v1.spec.f"}},
		{"an object theirs types and ours keeps open is not", typedObject, openObject, nil, nil, nil},
		{"fields theirs declares under an open object are still compared", openTypedObject, object(map[string]apiextensionsv1.JSONSchemaProps{"enabled": {Type: "string"}}),
			[]string{"v1.spec.f.enabled (boolean; ours: string)"}, nil, []string{"v1.spec.f"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			have := crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{"f": tc.theirs}))
			want := crdWithSpec("", object(map[string]apiextensionsv1.JSONSchemaProps{"f": tc.ours}))
			d := narrowing(have, want)
			if !slices.Equal(d.narrowed, tc.narrowed) {
				t.Errorf("narrowed %q, want %q", d.narrowed, tc.narrowed)
			}
			if got := texts(d.tightened); !slices.Equal(got, tc.tightened) {
				t.Errorf("tightened %q, want %q", got, tc.tightened)
			}
			if got := texts(d.opened); !slices.Equal(got, tc.opened) {
				t.Errorf("opened %q, want %q", got, tc.opened)
			}
			if tc.narrowed == nil && tc.tightened == nil && tc.opened == nil && !narrowing(want, want).empty() {
				t.Errorf("ours is narrower than itself: %+v", narrowing(want, want))
			}
		})
	}
}
