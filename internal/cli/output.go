package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"reflect"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/render"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// APIVersion versions every document gpuctl prints with -o json|yaml, so a pipeline can tell when
// its shape changes. The shapes are described by JSON Schemas in docs/schemas/, one per kind.
const APIVersion = "gpuctl.io/v1alpha1"

// genericNames are type names that say nothing without their package: detect.Result is
// "DetectResult", preflight.Report "PreflightReport"; plan.Plan is "Plan", engine.InstallResult
// "InstallResult"; ui.FleetVerify is "FleetVerify".
var genericNames = map[string]bool{"Result": true, "Report": true, "Status": true, "Summary": true, "Verify": true}

// kindOf names a document by its Go type.
func kindOf(v any) string {
	return kindOfType(reflect.TypeOf(v))
}

func kindOfType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		return kindOfType(t.Elem()) + "List"
	}
	name := t.Name()
	if genericNames[name] {
		pkg := path.Base(t.PkgPath())
		name = strings.ToUpper(pkg[:1]) + pkg[1:] + name
	}
	return name
}

// document is v as JSON with apiVersion and kind first; a list is wrapped as the items of a
// "<Kind>List" document.
func document(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	head := fmt.Sprintf(`{"apiVersion":%q,"kind":%q`, APIVersion, kindOf(v))
	switch {
	case bytes.Equal(b, []byte("{}")):
		return []byte(head + "}"), nil
	case len(b) > 0 && b[0] == '{':
		return append([]byte(head+","), b[1:]...), nil
	default:
		return []byte(head + `,"items":` + string(b) + "}"), nil
	}
}

// writeResult writes v as -o asks: a json or yaml document, otherwise what text writes (nil: nothing).
func writeResult(w io.Writer, format string, v any, text func() error) error {
	switch format {
	case "json":
		return writeJSON(w, v)
	case "yaml":
		return writeYAML(w, v)
	}
	if text == nil {
		return nil
	}
	return text()
}

func writeJSON(w io.Writer, v any) error {
	doc, err := document(v)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, doc, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

func writeYAML(w io.Writer, v any) error {
	doc, err := document(v)
	if err != nil {
		return err
	}
	b, err := yaml.JSONToYAML(doc)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// documents are the types gpuctl prints with -o json|yaml, one per kind; docs/schemas/<kind>.json
// describes each (internal/cli/schema_test.go keeps them current).
func documents() []any {
	return []any{&plan.Plan{}, &engine.InstallResult{}, &detect.Result{}, &preflight.Report{}, &Settings{},
		&engine.StatusResult{}, &engine.UpgradeResult{}, &engine.UninstallResult{}, &engine.TaintResult{}, &render.ImageList{}, &engine.VerifyResult{}, &Version{},
		&ui.FleetStatus{}, &ui.FleetVerify{}}
}
