package export

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	sigsyaml "sigs.k8s.io/yaml"
)

// Stream is the export as one multi-document YAML stream: the header and the notes as comments, then
// every document in order.
func (r *Result) Stream() ([]byte, error) {
	var b strings.Builder
	b.WriteString(r.preamble())
	for _, d := range r.Documents {
		y, err := d.yaml()
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.WriteString(y)
	}
	return []byte(b.String()), nil
}

// WriteDir writes one file per document into dir, numbered in apply order ("00-namespace-gpu-operator.yaml");
// the first carries the header and the notes.
func (r *Result) WriteDir(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for i, d := range r.Documents {
		y, err := d.yaml()
		if err != nil {
			return nil, err
		}
		if i == 0 {
			y = r.preamble() + y
		}
		name := filepath.Join(dir, fmt.Sprintf("%02d-%s.yaml", i, d.File))
		if err := os.WriteFile(name, []byte(y), 0o644); err != nil {
			return nil, err
		}
		files = append(files, name)
	}
	return files, nil
}

// preamble is the header and the notes, as YAML comments.
func (r *Result) preamble() string {
	var b strings.Builder
	for _, h := range r.Header {
		b.WriteString("# " + h + "\n")
	}
	if len(r.Notes) > 0 {
		b.WriteString("#\n# Not in this export (" + string(r.Engine) + " cannot do it, or gpuctl never writes it to Git):\n")
		for _, n := range r.Notes {
			b.WriteString("# - " + n + "\n")
		}
	}
	return b.String()
}

// yaml is the document with its comment lines, and the comment naming the values' layers above the
// values key.
func (d Document) yaml() (string, error) {
	out, err := sigsyaml.Marshal(d.Object)
	if err != nil {
		return "", fmt.Errorf("%s: %w", d.File, err)
	}
	var b strings.Builder
	for _, c := range d.Comment {
		b.WriteString("# " + c + "\n")
	}
	y := string(out)
	if len(d.ValuesKey) > 0 {
		y = commentKey(y, d.ValuesKey, "values gpuctl would install, from (lowest precedence first): "+strings.Join(d.Layers, "; "))
	}
	b.WriteString(y)
	return b.String(), nil
}

// commentKey puts comment above the line of the nested key path in y (block YAML as sigs.k8s.io/yaml
// writes it: two spaces per level).
func commentKey(y string, path []string, comment string) string {
	lines := strings.SplitAfter(y, "\n")
	depth := 0
	for i, l := range lines {
		key := strings.Repeat("  ", depth) + path[depth] + ":"
		if l == key+"\n" || strings.HasPrefix(l, key+" ") {
			depth++
			if depth == len(path) {
				indent := strings.Repeat("  ", depth-1)
				return strings.Join(lines[:i], "") + indent + "# " + comment + "\n" + strings.Join(lines[i:], "")
			}
		}
	}
	return y
}
