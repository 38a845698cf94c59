package valuesfacts

import (
	"fmt"
	"sort"
	"strings"
	"text/template/parse"
)

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
