package valuesfacts

import (
	"slices"
	"testing"
)

func TestDerive(t *testing.T) {
	chart := func(values, tpl string) Chart {
		return Chart{Tag: "v1.0.0", Values: []byte(values), ChartYAML: []byte("dependencies:\n- name: nfd\n  condition: nfd.enabled\n"),
			Templates: map[string][]byte{"policy.yaml": []byte(tpl)}}
	}
	for _, tc := range []struct {
		name             string
		values, tpl      string
		read, tested     []string
		notRead          []string
		defaults         map[string]any
		notes, fallbacks map[string]string
	}{
		{name: "a printed key is read, an if only tests its key, Chart.yaml's condition is tested",
			values: "driver:\n  enabled: true\n  version: \"1\"\n", tpl: "{{- if .Values.driver.enabled }}\nversion: {{ .Values.driver.version }}\n{{- end }}\n",
			read: []string{"driver.version"}, tested: []string{"driver.enabled", "nfd.enabled"}, notRead: []string{"driver", "driver.other"},
			defaults: map[string]any{"driver.enabled": true, "driver.version": "1"}},
		{name: "with and range make dot a values path; toYaml of dot reads the section",
			values: "a:\n  b:\n    c: 1\n", tpl: "{{- with .Values.a.b }}\nx: {{ toYaml . }}\n{{- end }}\n{{- range $k, $v := .Values.list }}\n{{ $v.name }}\n{{- end }}\n",
			read: []string{"a.b", "list.name"}, tested: []string{"a.b", "list"}},
		{name: "a variable bound to a section, $.Values, index and hasKey",
			values: "a:\n  b: 1\n", tpl: "{{- $d := .Values.driver }}\n{{ $d.version }} {{ $.Values.x.y }} {{ index .Values \"p\" \"q\" }} {{ if hasKey .Values.driver \"z\" }}{{ end }}\n",
			read: []string{"driver.version", "p.q", "x.y"}, tested: []string{"driver.z"}},
		{name: "a define in a helpers file reads from the root",
			values: "", tpl: "{{- define \"x\" -}}\n{{ .Values.operator.name }}\n{{- end }}\n", read: []string{"operator.name"}},
		{name: "values.yaml's deprecation note is a rename within its section",
			values: "driver:\n  kernelModuleType: auto\n  # NOTE: useOpenKernelModules has been deprecated and made no-op. Please use kernelModuleType instead.\n  # useOpenKernelModules: false\n",
			tpl:    "kernelModuleType: {{ .Values.driver.kernelModuleType }}\n", read: []string{"driver.kernelModuleType"},
			notes: map[string]string{"driver.useOpenKernelModules": "driver.kernelModuleType"}},
		{name: "a template falling back from an old key to the defined one is a rename",
			values: "driver:\n  newKey: a\n", tpl: "x: {{ .Values.driver.oldKey | default .Values.driver.newKey }}\n",
			read: []string{"driver.newKey", "driver.oldKey"}, fallbacks: map[string]string{"driver.oldKey": "driver.newKey"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Derive(chart(tc.values, tc.tpl))
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range tc.read {
				if !d.Read[k] {
					t.Errorf("%s not read: %v", k, sortedSet(d.Read))
				}
			}
			for _, k := range tc.tested {
				if !d.Tested[k] {
					t.Errorf("%s not tested: %v", k, sortedSet(d.Tested))
				}
			}
			for _, k := range tc.notRead {
				if d.Read[k] || d.Tested[k] {
					t.Errorf("%s read", k)
				}
			}
			for k, v := range tc.defaults {
				if d.Defaults[k] != v {
					t.Errorf("default %s = %v, want %v", k, d.Defaults[k], v)
				}
			}
			if tc.notes != nil && !equalMaps(d.Notes, tc.notes) {
				t.Errorf("notes %v, want %v", d.Notes, tc.notes)
			}
			if tc.fallbacks != nil && !equalMaps(d.Fallbacks, tc.fallbacks) {
				t.Errorf("fallbacks %v, want %v", d.Fallbacks, tc.fallbacks)
			}
		})
	}
}

func TestFactsFindRenames(t *testing.T) {
	release := func(tag, values, tpl string) *Derived {
		d, err := Derive(Chart{Tag: tag, Values: []byte(values), Templates: map[string][]byte{"clusterpolicy.yaml": []byte(tpl)}})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	t.Run("a key the next release stops reading, where the same field reads a new key of its parent, is renamed", func(t *testing.T) {
		old := release("v1.0.0", "driver:\n  useOpen: false\n", "spec:\n  driver:\n    kernelModuleType: {{ .Values.driver.useOpen }}\n")
		nw := release("v2.0.0", "driver:\n  kernelModuleType: auto\n", "spec:\n  driver:\n    kernelModuleType: {{ .Values.driver.kernelModuleType }}\n")
		f := Facts([]*Derived{old, nw}, "test")
		r, ok := f.Releases["v2.0.0"].Renamed["driver.useOpen"]
		if !ok || r.To != "driver.kernelModuleType" || r.Since != "v2.0.0" {
			t.Errorf("renames %+v", f.Releases["v2.0.0"].Renamed)
		}
		if len(f.Releases["v1.0.0"].Renamed) != 0 {
			t.Errorf("v1.0.0 renames %+v", f.Releases["v1.0.0"].Renamed)
		}
	})
	t.Run("a key that goes while the field goes too is dropped, not renamed", func(t *testing.T) {
		old := release("v1.0.0", "operator:\n  initContainer:\n    image: cuda\n", "spec:\n  operator:\n    initContainer:\n      image: {{ .Values.operator.initContainer.image }}\n")
		nw := release("v2.0.0", "operator:\n  other: 1\n", "spec:\n  operator:\n    other: {{ .Values.operator.other }}\n")
		f := Facts([]*Derived{old, nw}, "test")
		if len(f.Releases["v2.0.0"].Renamed) != 0 {
			t.Errorf("renames %+v", f.Releases["v2.0.0"].Renamed)
		}
		if f.Releases["v2.0.0"].Reads("operator.initContainer.image") || !f.Releases["v1.0.0"].Reads("operator.initContainer.image") {
			t.Errorf("reads: v1 %v, v2 %v", f.Releases["v1.0.0"].Read, f.Releases["v2.0.0"].Read)
		}
	})
	t.Run("the read lists are sorted, as Reads' binary search needs", func(t *testing.T) {
		d := release("v1.0.0", "", "{{ .Values.z }} {{ .Values.a }} {{ .Values.m }}\n")
		f := Facts([]*Derived{d}, "test")
		if !slices.IsSorted(f.Releases["v1.0.0"].Read) {
			t.Errorf("read %v", f.Releases["v1.0.0"].Read)
		}
	})
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
