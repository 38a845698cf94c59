package support

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/yaml"
)

// ManifestName is the manifest's file name at the root of the bundle.
const ManifestName = "manifest.json"

// Manifest describes a bundle: every file in it, what was redacted, and what could not be read.
type Manifest struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Created    time.Time `json:"created"`
	// GpuctlVersion is the version of the gpuctl that wrote the bundle.
	GpuctlVersion string `json:"gpuctlVersion"`
	Files         []File `json:"files"`
	// Redactions say what was removed from which file (never the value).
	Redactions []Redaction `json:"redactions"`
	// Forbidden are the reads the caller's permissions refused; Errors the ones that failed for
	// another reason; Notes what was not there to read (a CRD not installed, a namespace missing).
	Forbidden []Problem `json:"forbidden"`
	Errors    []Problem `json:"errors"`
	Notes     []string  `json:"notes,omitempty"`
}

// File is one file of the bundle.
type File struct {
	Name string `json:"name"`
	// What says what it holds.
	What string `json:"what"`
	Size int    `json:"size"`
}

// Problem is a read that did not succeed.
type Problem struct {
	What   string `json:"what"`
	Reason string `json:"reason"`
}

// Bundle gathers the files of a support bundle in memory, redacted, and writes them as a tar.gz.
// It is safe for concurrent use by collectors.
type Bundle struct {
	mu       sync.Mutex
	files    map[string][]byte
	manifest Manifest
	redactor *Redactor
}

// NewBundle starts a bundle.
func NewBundle(apiVersion, gpuctlVersion string, now time.Time) *Bundle {
	return &Bundle{
		files:    map[string][]byte{},
		redactor: NewRedactor(),
		manifest: Manifest{APIVersion: apiVersion, Kind: "DiagnoseManifest", Created: now.UTC(), GpuctlVersion: gpuctlVersion,
			Files: []File{}, Redactions: []Redaction{}, Forbidden: []Problem{}, Errors: []Problem{}},
	}
}

// AddText stores text (a log, a rendered report) after redacting it.
func (b *Bundle) AddText(name, what, text string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.add(name, what, []byte(b.redactor.Text(name, text)))
}

// AddObject stores v as YAML (or JSON when name ends in .json): credential-like keys and
// environment variables are redacted in the tree, then credential shapes in the text.
func (b *Bundle) AddObject(name, what string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	trimMetadata(tree)
	tree = b.redactor.Value(name, "", tree)
	var out []byte
	if strings.HasSuffix(name, ".json") {
		out, err = json.MarshalIndent(tree, "", "  ")
		out = append(out, '\n')
	} else {
		out, err = yaml.Marshal(tree)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	b.add(name, what, []byte(b.redactor.Text(name, string(out))))
	return nil
}

func (b *Bundle) add(name, what string, content []byte) {
	name = path.Clean(name)
	if _, ok := b.files[name]; ok {
		b.manifest.Files = slices.DeleteFunc(b.manifest.Files, func(f File) bool { return f.Name == name })
	}
	b.files[name] = content
	b.manifest.Files = append(b.manifest.Files, File{Name: name, What: what, Size: len(content)})
}

// Fail notes a read that did not succeed: a 403 goes under forbidden, anything else under errors.
func (b *Bundle) Fail(what string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := Problem{What: what, Reason: b.redactor.Text(ManifestName, err.Error())}
	if apierrors.IsForbidden(err) || strings.Contains(err.Error(), " is forbidden: ") {
		// Helm wraps its storage's errors as text: a refused Secret read is still a refusal.
		b.manifest.Forbidden = append(b.manifest.Forbidden, p)
		return
	}
	b.manifest.Errors = append(b.manifest.Errors, p)
}

// Note records something that was not there to collect.
func (b *Bundle) Note(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.manifest.Notes = append(b.manifest.Notes, fmt.Sprintf(format, args...))
}

// Manifest returns the manifest as it stands, files and problems sorted.
func (b *Bundle) Manifest() Manifest {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.manifest
	m.Files = slices.Clone(m.Files)
	slices.SortFunc(m.Files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	byWhat := func(a, b Problem) int { return strings.Compare(a.What, b.What) }
	m.Forbidden = slices.Clone(m.Forbidden)
	slices.SortStableFunc(m.Forbidden, byWhat)
	m.Errors = slices.Clone(m.Errors)
	slices.SortStableFunc(m.Errors, byWhat)
	m.Notes = slices.Clone(m.Notes)
	slices.Sort(m.Notes)
	m.Redactions = b.redactor.Redactions()
	return m
}

// Write writes the bundle as a gzip-compressed tar under dir (the directory every entry is in, so
// unpacking does not spill into the current directory): the manifest first, then the files by name.
func (b *Bundle) Write(w io.Writer, dir string, now time.Time) (Manifest, error) {
	m := b.Manifest()
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	mj = append(mj, '\n')
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	put := func(name string, content []byte) error {
		hdr := &tar.Header{Name: path.Join(dir, name), Mode: 0o644, Size: int64(len(content)), ModTime: now, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(content)
		return err
	}
	if err := put(ManifestName, mj); err != nil {
		return m, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, f := range m.Files {
		if err := put(f.Name, b.files[f.Name]); err != nil {
			return m, err
		}
	}
	if err := tw.Close(); err != nil {
		return m, err
	}
	return m, gz.Close()
}

// lastApplied is kubectl's copy of an applied object, which repeats the object (env values
// included) in one string; the bundle leaves it out with managedFields, which say nothing to support.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// trimMetadata removes managedFields and kubectl's last-applied copy from every object in the tree.
func trimMetadata(v any) {
	switch x := v.(type) {
	case map[string]any:
		if md, ok := x["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
			if ann, ok := md["annotations"].(map[string]any); ok {
				delete(ann, lastApplied)
			}
		}
		for _, val := range x {
			trimMetadata(val)
		}
	case []any:
		for _, val := range x {
			trimMetadata(val)
		}
	}
}
