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
	"sort"
	"strings"
	"text/template/parse"

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

// templates parses every template together (the defines of _helpers.tpl included) and walks them.
func (d *Derived) templates(files map[string][]byte) error {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		trees := map[string]*parse.Tree{}
		t := parse.New(name)
		t.Mode = parse.SkipFuncCheck
		if _, err := t.Parse(string(files[name]), "{{", "}}", trees); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		tnames := make([]string, 0, len(trees))
		for n := range trees {
			tnames = append(tnames, n)
		}
		sort.Strings(tnames)
		for _, tn := range tnames {
			if trees[tn].Root == nil {
				continue
			}
			w := &walker{d: d, file: name}
			w.list(trees[tn].Root, scope{dot: dot{root: true}, vars: map[string]dot{}})
		}
	}
	return nil
}

// dot is what "." is in a template: the root context (where .Values is), a values path, or unknown.
type dot struct {
	root   bool
	values bool
	path   string
}

type scope struct {
	dot  dot
	vars map[string]dot
}

func (s scope) with(d dot) scope {
	return scope{dot: d, vars: s.vars}
}

type walker struct {
	d     *Derived
	file  string
	stack yamlStack
}

func (w *walker) list(l *parse.ListNode, s scope) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		w.node(n, s)
	}
}

func (w *walker) node(n parse.Node, s scope) {
	switch n := n.(type) {
	case *parse.TextNode:
		w.text(string(n.Text))
	case *parse.ActionNode:
		w.action(n.Pipe, s)
	case *parse.IfNode:
		w.cond(n.Pipe, s)
		w.list(n.List, s)
		w.list(n.ElseList, s)
	case *parse.WithNode:
		d := w.cond(n.Pipe, s)
		w.list(n.List, s.with(d))
		w.list(n.ElseList, s)
	case *parse.RangeNode:
		d := w.cond(n.Pipe, s)
		inner := s
		if d.values {
			inner = s.with(d)
			for _, v := range n.Pipe.Decl {
				inner.vars[v.Ident[0]] = d
			}
		}
		w.list(n.List, inner)
		w.list(n.ElseList, s)
	case *parse.TemplateNode:
		if n.Pipe != nil {
			w.pipe(n.Pipe, s, false)
		}
	case *parse.ListNode:
		w.list(n, s)
	}
}

// text follows the YAML keys of the template's text, for the location of the actions after them.
func (w *walker) text(t string) {
	lines := strings.Split(t, "\n")
	for i, line := range lines {
		if i == 0 && w.stack.midLine {
			continue
		}
		w.stack.line(line)
	}
	w.stack.midLine = !strings.HasSuffix(t, "\n")
}

// action is {{ pipeline }}: a variable bound to a values path, or values used.
func (w *walker) action(p *parse.PipeNode, s scope) {
	if len(p.Decl) == 1 && len(p.Cmds) == 1 && len(p.Cmds[0].Args) == 1 {
		if d, ok := w.resolve(p.Cmds[0].Args[0], s); ok {
			s.vars[p.Decl[0].Ident[0]] = d
			return
		}
	}
	w.pipe(p, s, false)
}

// cond is the pipeline of if, with or range: the keys in it are tested; what "." becomes in a with
// or range body is returned.
func (w *walker) cond(p *parse.PipeNode, s scope) dot {
	w.pipe(p, s, true)
	if len(p.Cmds) == 1 && len(p.Cmds[0].Args) == 1 {
		if d, ok := w.resolve(p.Cmds[0].Args[0], s); ok {
			return d
		}
	}
	return dot{}
}

func (w *walker) pipe(p *parse.PipeNode, s scope, tested bool) {
	piped := "" // the values path the previous command was, passed on as the last argument
	for _, c := range p.Cmds {
		w.command(c, s, tested, piped)
		piped = ""
		if len(c.Args) == 1 {
			if d, ok := w.resolve(c.Args[0], s); ok && d.values {
				piped = d.path
			}
		}
	}
}

// fallbackFuncs return their first non-empty argument (Helm's sprig: default takes the fallback
// first, then the value).
var fallbackFuncs = map[string]bool{"default": true, "coalesce": true, "or": true}

func (w *walker) command(c *parse.CommandNode, s scope, tested bool, piped string) {
	if len(c.Args) == 0 {
		return
	}
	fn := ""
	if id, ok := c.Args[0].(*parse.IdentifierNode); ok {
		fn = id.Ident
	}
	args := c.Args
	if fn != "" {
		args = c.Args[1:]
	}
	switch fn {
	case "hasKey":
		if len(args) == 2 {
			if d, ok := w.resolve(args[0], s); ok && d.values {
				if k, ok := args[1].(*parse.StringNode); ok {
					w.use(join(d.path, k.Text), true)
					return
				}
			}
		}
	case "index", "dig":
		if p, ok := w.indexPath(fn, args, s); ok {
			w.use(p, tested)
			return
		}
	}
	var paths []string
	for _, a := range args {
		if d, ok := w.resolve(a, s); ok && d.values {
			w.use(d.path, tested)
			paths = append(paths, d.path)
			continue
		}
		switch a := a.(type) {
		case *parse.PipeNode:
			w.pipe(a, s, tested)
		case *parse.ChainNode:
			if p, ok := a.Node.(*parse.PipeNode); ok {
				w.pipe(p, s, tested)
			}
		}
	}
	if piped != "" {
		paths = append(paths, piped)
	}
	if fallbackFuncs[fn] && len(paths) >= 2 {
		// Every key but the one values.yaml defines is an older spelling of it (checked in Derive).
		for _, old := range paths {
			for _, nw := range paths {
				if old != nw {
					w.d.Fallbacks[old] = nw
				}
			}
		}
	}
}

// indexPath is the values path of `index M "a" "b"` or `dig "a" "b" default M`.
func (w *walker) indexPath(fn string, args []parse.Node, s scope) (string, bool) {
	if len(args) < 2 {
		return "", false
	}
	base, keys := args[0], args[1:]
	if fn == "dig" {
		if len(args) < 3 {
			return "", false
		}
		base, keys = args[len(args)-1], args[:len(args)-2]
	}
	d, ok := w.resolve(base, s)
	if !ok {
		return "", false
	}
	p, root := d.path, d.root
	for _, k := range keys {
		sn, ok := k.(*parse.StringNode)
		if !ok {
			return "", false
		}
		if root {
			if sn.Text != "Values" {
				return "", false
			}
			root = false
			continue
		}
		p = join(p, sn.Text)
	}
	return p, !root
}

// use records a read of path at the current template field.
func (w *walker) use(path string, tested bool) {
	if path == "" {
		return
	}
	if tested {
		w.d.Tested[path] = true
	} else {
		w.d.Read[path] = true
	}
	if loc := w.stack.path(); loc != "" {
		if w.d.Locations[path] == nil {
			w.d.Locations[path] = map[string]bool{}
		}
		w.d.Locations[path][w.file+":"+loc] = true
	}
}

// resolve is what node n denotes: the root context or a values path.
func (w *walker) resolve(n parse.Node, s scope) (dot, bool) {
	switch n := n.(type) {
	case *parse.DotNode:
		return s.dot, s.dot.root || s.dot.values
	case *parse.FieldNode:
		return descend(s.dot, n.Ident)
	case *parse.VariableNode:
		base := dot{root: true}
		if n.Ident[0] != "$" {
			v, ok := s.vars[n.Ident[0]]
			if !ok {
				return dot{}, false
			}
			base = v
		}
		return descend(base, n.Ident[1:])
	case *parse.ChainNode:
		if p, ok := n.Node.(*parse.PipeNode); ok && len(p.Cmds) == 1 && len(p.Cmds[0].Args) == 1 {
			if d, ok := w.resolve(p.Cmds[0].Args[0], s); ok {
				return descend(d, n.Field)
			}
		}
	case *parse.PipeNode:
		if len(n.Cmds) == 1 && len(n.Cmds[0].Args) == 1 {
			return w.resolve(n.Cmds[0].Args[0], s)
		}
	}
	return dot{}, false
}

// descend follows field names from d: .Values from the root, any key from a values path.
func descend(d dot, idents []string) (dot, bool) {
	if len(idents) == 0 {
		return d, d.root || d.values
	}
	if d.root {
		if idents[0] != "Values" {
			return dot{}, false
		}
		return dot{values: true, path: strings.Join(idents[1:], ".")}, true
	}
	if d.values {
		return dot{values: true, path: join(d.path, strings.Join(idents, "."))}, true
	}
	return dot{}, false
}

// yamlStack follows the mapping keys of YAML lines by indentation.
type yamlStack struct {
	keys    []yamlKey
	midLine bool
}

type yamlKey struct {
	indent int
	name   string
}

func (s *yamlStack) line(line string) {
	m := keyLine.FindStringSubmatch(line)
	if m == nil {
		return
	}
	indent := len(m[1])
	if strings.HasPrefix(strings.TrimLeft(line, " "), "- ") {
		indent += 2
	}
	for len(s.keys) > 0 && s.keys[len(s.keys)-1].indent >= indent {
		s.keys = s.keys[:len(s.keys)-1]
	}
	s.keys = append(s.keys, yamlKey{indent: indent, name: strings.Trim(m[2], `"`)})
}

// parentOf is the path of the keys a line indented by indent sits under.
func (s *yamlStack) parentOf(indent int) string {
	var names []string
	for _, k := range s.keys {
		if k.indent < indent {
			names = append(names, k.name)
		}
	}
	return strings.Join(names, ".")
}

func (s *yamlStack) path() string {
	names := make([]string, len(s.keys))
	for i, k := range s.keys {
		names[i] = k.name
	}
	return strings.Join(names, ".")
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
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
