// Package valuesfacts derives, from NVIDIA's GPU Operator chart of each release
// (deployments/gpu-operator of NVIDIA/gpu-operator at the release tag), the facts gpuctl's upgrade
// needs about its values: which key paths the templates read, the scalar defaults of values.yaml, and
// which keys NVIDIA renamed. `make values-facts` (e2e/cmd/valuesfacts) writes them to
// internal/bundle/values_facts.json; TestValuesFactsAreGenerated (package e2e) checks the committed
// file is current.
//
// A rename is found three ways, each from NVIDIA's own files: values.yaml's deprecation note ("X has
// been deprecated ... Please use Y instead", in the section of X), a template that falls back from
// one key to the other (default/coalesce/or of two .Values keys, one of them not in values.yaml), and
// a key the next release stops reading while the same template field (file and YAML path) reads a
// new key of the same parent.
//
// This package is build infrastructure; gpuctl itself reads only the generated file.
package valuesfacts

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/internal/bundle"
)

// subchartKey is the NFD subchart's section of NVIDIA's values; gpuctl installs NFD on its own.
const subchartKey = "node-feature-discovery"

// Chart is the files of one release's chart the facts come from.
type Chart struct {
	Tag       string
	Values    []byte            // values.yaml
	ChartYAML []byte            // Chart.yaml (its dependencies' conditions are reads)
	Templates map[string][]byte // templates/<name>
}

// Derived is what one chart says, before releases are compared.
type Derived struct {
	Tag      string
	Defined  map[string]bool // every key path of values.yaml
	Defaults map[string]any
	Read     map[string]bool
	Tested   map[string]bool
	// Locations maps a key path to the template fields that read it ("clusterpolicy.yaml:spec.driver.kernelModuleType").
	Locations map[string]map[string]bool
	// Notes are renames values.yaml's deprecation notes state, old key to new.
	Notes map[string]string
	// Fallbacks are renames templates' fallbacks state, old key to new.
	Fallbacks map[string]string
}

// Derive reads one chart.
func Derive(c Chart) (*Derived, error) {
	d := &Derived{Tag: c.Tag, Defined: map[string]bool{}, Defaults: map[string]any{}, Read: map[string]bool{},
		Tested: map[string]bool{}, Locations: map[string]map[string]bool{}, Notes: map[string]string{}, Fallbacks: map[string]string{}}
	var values map[string]any
	if err := yaml.Unmarshal(c.Values, &values); err != nil {
		return nil, fmt.Errorf("%s values.yaml: %w", c.Tag, err)
	}
	delete(values, subchartKey)
	d.walkValues("", values)
	d.notes(string(c.Values))
	if err := d.chartConditions(c.ChartYAML); err != nil {
		return nil, fmt.Errorf("%s Chart.yaml: %w", c.Tag, err)
	}
	if err := d.templates(c.Templates); err != nil {
		return nil, fmt.Errorf("%s templates: %w", c.Tag, err)
	}
	for old, nw := range d.Fallbacks {
		if d.Defined[old] || !d.Defined[nw] {
			delete(d.Fallbacks, old)
		}
	}
	return d, nil
}

func (d *Derived) walkValues(prefix string, m map[string]any) {
	for k, v := range m {
		p := join(prefix, k)
		d.Defined[p] = true
		switch v := v.(type) {
		case map[string]any:
			d.walkValues(p, v)
		case []any:
		default:
			d.Defaults[p] = v
		}
	}
}

// notePattern is values.yaml's deprecation note, e.g. v26.7.0's driver section: "NOTE:
// useOpenKernelModules has been deprecated and made no-op. Please use kernelModuleType instead."
var notePattern = regexp.MustCompile(`([A-Za-z][\w.]*) (?:has been|is) deprecated\b.*?\b[Uu]se ([A-Za-z][\w.]*) instead`)

// keyLine is a YAML mapping key on a line of its own or with a value.
var keyLine = regexp.MustCompile(`^(\s*)(?:- )?([A-Za-z0-9_.\-/"]+):(\s|$)`)

// notes finds the deprecation notes of values.yaml, each relative to the section it is written in.
func (d *Derived) notes(src string) {
	var stack yamlStack
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		if strings.HasPrefix(trimmed, "#") {
			m := notePattern.FindStringSubmatch(trimmed)
			if m == nil {
				continue
			}
			parent := stack.parentOf(indent)
			old, nw := join(parent, m[1]), join(parent, m[2])
			if !d.Defined[old] && d.Defined[nw] {
				d.Notes[old] = nw
			}
			continue
		}
		stack.line(line)
	}
}

// chartConditions: Chart.yaml's dependency conditions (nfd.enabled) are tested keys.
func (d *Derived) chartConditions(src []byte) error {
	var ch struct {
		Dependencies []struct {
			Condition string `json:"condition"`
		} `json:"dependencies"`
	}
	if err := yaml.Unmarshal(src, &ch); err != nil {
		return err
	}
	for _, dep := range ch.Dependencies {
		for _, c := range strings.Split(dep.Condition, ",") {
			if c = strings.TrimSpace(c); c != "" {
				d.Tested[c] = true
			}
		}
	}
	return nil
}

// Facts compares the releases, oldest first, and returns the facts to commit.
func Facts(releases []*Derived, generated string) *bundle.ValuesFacts {
	out := &bundle.ValuesFacts{Generated: generated, Releases: map[string]bundle.ReleaseValues{}}
	type found struct {
		rename bundle.Rename
		old    string
	}
	var structural []found
	for i, d := range releases {
		if i > 0 {
			prev := releases[i-1]
			for _, r := range structuralRenames(prev, d) {
				structural = append(structural, found{old: r[0], rename: bundle.Rename{To: r[1], Since: d.Tag,
					Evidence: fmt.Sprintf("%s reads %s where %s read %s (%s)", d.Tag, r[1], prev.Tag, r[0], r[2])}})
			}
		}
		rv := bundle.ReleaseValues{Read: sortedSet(d.Read), Tested: sortedSet(d.Tested), Defaults: d.Defaults, Renamed: map[string]bundle.Rename{}}
		reads := func(k string) bool { return rv.Reads(k) }
		for _, s := range structural {
			if !reads(s.old) && reads(s.rename.To) {
				rv.Renamed[s.old] = s.rename
			}
		}
		for old, nw := range d.Fallbacks {
			rv.Renamed[old] = bundle.Rename{To: nw, Since: d.Tag, Evidence: d.Tag + " templates fall back from " + nw + " to " + old}
		}
		for old, nw := range d.Notes {
			if !reads(old) {
				since := d.Tag
				for _, e := range releases[:i] {
					if e.Notes[old] == nw {
						since = e.Tag
						break
					}
				}
				rv.Renamed[old] = bundle.Rename{To: nw, Since: since, Evidence: "NVIDIA's values.yaml of " + d.Tag + " says " + old + " is deprecated and to use " + nw}
			}
		}
		if len(rv.Renamed) == 0 {
			rv.Renamed = nil
		}
		out.Releases[d.Tag] = rv
	}
	return out
}

// structuralRenames are keys prev reads that next does not, where next reads a new key of the same
// parent at a template field where prev read the old one: {old, new, field}.
func structuralRenames(prev, next *Derived) [][3]string {
	var out [][3]string
	for _, old := range sortedSet(prev.Locations) {
		if next.Read[old] || next.Tested[old] || next.Defined[old] {
			continue
		}
		for _, nw := range sortedSet(next.Locations) {
			if prev.Read[nw] || prev.Tested[nw] || prev.Defined[nw] || parent(nw) != parent(old) {
				continue
			}
			for _, loc := range sortedSet(prev.Locations[old]) {
				if next.Locations[nw][loc] {
					out = append(out, [3]string{old, nw, loc})
					break
				}
			}
		}
	}
	return out
}

func parent(k string) string {
	if i := strings.LastIndexByte(k, '.'); i >= 0 {
		return k[:i]
	}
	return ""
}

func sortedSet[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
