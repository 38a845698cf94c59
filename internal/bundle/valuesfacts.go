package bundle

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// values_facts.json holds what NVIDIA's chart of each release in the catalog reads from its values:
// the key paths its templates use, the scalar defaults of its values.yaml, and the keys NVIDIA
// renamed. It is generated from deployments/gpu-operator/values.yaml and templates/ of
// NVIDIA/gpu-operator at each release tag by `make values-facts` (e2e/cmd/valuesfacts), and
// TestValuesFactsAreGenerated fails when it is not current. It holds facts (key paths and scalar
// defaults), not NVIDIA's files: gpuctl needs to know which keys a release reads, not its chart.
//
//go:embed values_facts.json
var valuesFactsJSON []byte

// ValuesFacts are the derived facts of every release's chart values (values_facts.json).
type ValuesFacts struct {
	// Generated says how the file was made.
	Generated string `json:"generated"`
	// Releases maps a release tag ("v26.7.0") to its facts.
	Releases map[string]ReleaseValues `json:"releases"`
}

// ReleaseValues are the facts about one release's chart values.
type ReleaseValues struct {
	// Read are key paths the templates (or Chart.yaml's dependency conditions) use as a value: the key
	// and everything under it is read (toYaml of a section, a scalar printed into a field).
	Read []string `json:"read"`
	// Tested are key paths the templates only test or descend into (if, with, range, hasKey): the key
	// itself is read, its descendants only where listed themselves.
	Tested []string `json:"tested"`
	// Defaults are values.yaml's scalar leaves (strings, numbers, booleans, null) by key path.
	Defaults map[string]any `json:"defaults"`
	// Renamed maps a key this release does not read to the key NVIDIA replaced it with, with the
	// evidence (values.yaml's own deprecation note, a template falling back from one key to the
	// other, or the same template field reading the new key where the previous release read the old).
	Renamed map[string]Rename `json:"renamed,omitempty"`
}

// Rename is one key NVIDIA replaced.
type Rename struct {
	To string `json:"to"`
	// Since is the first release of the catalog whose chart reads To instead.
	Since string `json:"since"`
	// Evidence says where the rename was found.
	Evidence string `json:"evidence"`
}

// LoadValuesFacts parses the embedded facts. It returns a new value on every call.
func LoadValuesFacts() (*ValuesFacts, error) {
	return ParseValuesFacts(valuesFactsJSON)
}

// ParseValuesFacts parses a values_facts.json document.
func ParseValuesFacts(b []byte) (*ValuesFacts, error) {
	var f ValuesFacts
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("values facts: %w", err)
	}
	return &f, nil
}

// Reads reports whether the release's chart reads key (a dotted path).
func (r ReleaseValues) Reads(key string) bool {
	if slices.Contains(r.Tested, key) {
		return true
	}
	for p := key; ; {
		if _, found := slices.BinarySearch(r.Read, p); found {
			return true
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// ValueChanges are what moving from one release's chart to another's does to a user's values.
type ValueChanges struct {
	From string `json:"from"`
	To   string `json:"to"`
	// NotRead are keys the user set that the target release does not read.
	NotRead []UnreadKey `json:"notRead,omitempty"`
	// ChangedDefaults are keys the user (and gpuctl) did not set whose default differs.
	ChangedDefaults []ChangedDefault `json:"changedDefaults,omitempty"`
}

// UnreadKey is a key the user set that the target release does not read.
type UnreadKey struct {
	Key string `json:"key"`
	// ReadBefore says the installed release read it (so the upgrade drops it).
	ReadBefore bool `json:"readBefore"`
	// Replacement is the key NVIDIA replaced it with, if any.
	Replacement string `json:"replacement,omitempty"`
	Evidence    string `json:"evidence,omitempty"`
}

// ChangedDefault is a default that differs between the two releases.
type ChangedDefault struct {
	Key  string `json:"key"`
	From any    `json:"from"`
	To   any    `json:"to"`
}

// Empty reports whether there is nothing to acknowledge.
func (c *ValueChanges) Empty() bool {
	return c == nil || len(c.NotRead) == 0 && len(c.ChangedDefaults) == 0
}

// Summary is one line: how many keys are not read and how many defaults change.
func (c *ValueChanges) Summary() string {
	var parts []string
	if n := len(c.NotRead); n > 0 {
		parts = append(parts, plural(n, "value you set that "+c.To+" does not read", "values you set that "+c.To+" does not read"))
	}
	if n := len(c.ChangedDefaults); n > 0 {
		parts = append(parts, plural(n, "default that changes", "defaults that change"))
	}
	return strings.Join(parts, " and ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// Lines are the changes as messages, one a line, the keys not read first.
func (c *ValueChanges) Lines() []string {
	var out []string
	for _, k := range c.NotRead {
		msg := k.Key + ": " + c.To + " does not read it"
		if k.ReadBefore {
			msg = k.Key + ": " + c.To + " no longer reads it (" + c.From + " did)"
		}
		if k.Replacement != "" {
			msg += "; NVIDIA replaced it with " + k.Replacement
		}
		out = append(out, msg)
	}
	for _, d := range c.ChangedDefaults {
		out = append(out, fmt.Sprintf("%s: default changes from %s to %s (not set by you)", d.Key, show(d.From), show(d.To)))
	}
	return out
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// subchartKey is the values section NVIDIA's chart hands to its node-feature-discovery subchart;
// gpuctl installs NFD as a release of its own, so its keys are not the operator chart's.
const subchartKey = "node-feature-discovery"

// Compare says what moving from release from to release to does to values: user are the values the
// user set (-f files and --set merged), gpuctl are the values gpuctl itself sets (the release's image
// pins, the profile), whose defaults therefore do not apply. An unknown release is an error; from
// equal to to has no changes.
func (f *ValuesFacts) Compare(from, to string, user map[string]any, gpuctl ...map[string]any) (*ValueChanges, error) {
	out := &ValueChanges{From: from, To: to}
	if from == to {
		return out, nil
	}
	fr, ok := f.Releases[from]
	if !ok {
		return nil, fmt.Errorf("values facts: no release %s", from)
	}
	tr, ok := f.Releases[to]
	if !ok {
		return nil, fmt.Errorf("values facts: no release %s", to)
	}
	userKeys := LeafKeys(user)
	for _, u := range tr.unread(userKeys) {
		u.ReadBefore = fr.Reads(u.Key)
		// A key neither release reads and nobody renamed is not about the upgrade (a typo, or a key
		// of gpuctl's chart only): install already did not read it (Unread says so there).
		if u.ReadBefore || u.Replacement != "" {
			out.NotRead = append(out.NotRead, u)
		}
	}
	set := slices.Clone(userKeys)
	for _, g := range gpuctl {
		set = append(set, LeafKeys(g)...)
	}
	for _, k := range sortedKeys(tr.Defaults) {
		old, ok := fr.Defaults[k]
		if !ok || show(old) == show(tr.Defaults[k]) || coveredBy(k, set) {
			continue
		}
		out.ChangedDefaults = append(out.ChangedDefaults, ChangedDefault{Key: k, From: old, To: tr.Defaults[k]})
	}
	return out, nil
}

// Unread are the keys of user (leaf paths) that release's chart does not read, the NFD subchart's
// section aside, each with the key NVIDIA replaced it with where it renamed one: values an install of
// that release ignores.
func (f *ValuesFacts) Unread(release string, user map[string]any) ([]UnreadKey, error) {
	r, ok := f.Releases[release]
	if !ok {
		return nil, fmt.Errorf("values facts: no release %s", release)
	}
	return r.unread(LeafKeys(user)), nil
}

// unread are the keys the release does not read, NFD's section aside, with NVIDIA's replacements.
func (r ReleaseValues) unread(keys []string) []UnreadKey {
	var out []UnreadKey
	for _, k := range keys {
		if k == subchartKey || strings.HasPrefix(k, subchartKey+".") || r.Reads(k) {
			continue
		}
		u := UnreadKey{Key: k}
		if rn, ok := renamed(r, k); ok {
			u.Replacement, u.Evidence = rn.To, rn.Evidence
		}
		out = append(out, u)
	}
	return out
}

// renamed finds the rename of key or of one of its parents (driver.useOpenKernelModules, or
// a.old.x where a.old became a.new: a.new.x).
func renamed(r ReleaseValues, key string) (Rename, bool) {
	for p := key; ; {
		if rn, ok := r.Renamed[p]; ok {
			rn.To += key[len(p):]
			return rn, true
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			return Rename{}, false
		}
		p = p[:i]
	}
}

// coveredBy reports whether key or one of its parents is among set (the key is then set, not
// defaulted), or key is a parent of a set key.
func coveredBy(key string, set []string) bool {
	for _, s := range set {
		if s == key || strings.HasPrefix(key, s+".") {
			return true
		}
	}
	return false
}

// LeafKeys are the dotted paths of values' leaves, sorted: scalars, lists and empty maps.
func LeafKeys(values map[string]any) []string {
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(p, sub)
				continue
			}
			out = append(out, p)
		}
	}
	walk("", values)
	slices.Sort(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
