package cli

import (
	"bytes"
	"context"
	"encoding"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/e2e/schema"
	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/runner"
)

const schemaDir = "../../docs/schemas"

// schemaFor is the JSON Schema of a document type: the type's own, with apiVersion and kind, and
// every object, array and reference allowed to be null (Go's nil pointers, slices and maps).
func schemaFor(v any) ([]byte, error) {
	textMarshaler := reflect.TypeFor[encoding.TextMarshaler]()
	r := &jsonschema.Reflector{
		// Types of several packages share names (detect.Result, preflight.Result; plan.Taint, corev1.Taint).
		Namer: func(t reflect.Type) string {
			if t.PkgPath() == "" {
				return t.Name()
			}
			return path.Base(t.PkgPath()) + "." + t.Name()
		},
		// A type that marshals itself as text (plan.Duration: "20m0s") is a string.
		Mapper: func(t reflect.Type) *jsonschema.Schema {
			if t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
				return &jsonschema.Schema{Type: "string"}
			}
			return nil
		},
	}
	s := r.Reflect(v)
	s.ID = jsonschema.ID("https://github.com/gpuctl/gpuctl/docs/schemas/" + kindOf(v) + ".json")
	s.Title = kindOf(v)
	root := s
	if root.Ref != "" {
		root = s.Definitions[strings.TrimPrefix(root.Ref, "#/$defs/")]
	}
	root.Properties.Set("apiVersion", &jsonschema.Schema{Type: "string", Const: APIVersion})
	root.Properties.Set("kind", &jsonschema.Schema{Type: "string", Const: kindOf(v)})
	root.Required = append([]string{"apiVersion", "kind"}, root.Required...)
	for _, d := range s.Definitions {
		nullable(d)
	}
	return json.MarshalIndent(s, "", "  ")
}

func nullable(s *jsonschema.Schema) {
	if s == nil || s.Properties == nil {
		return
	}
	for p := s.Properties.Oldest(); p != nil; p = p.Next() {
		v := p.Value
		if v.Type == "array" || v.Type == "object" || v.Ref != "" {
			p.Value = &jsonschema.Schema{AnyOf: []*jsonschema.Schema{v, {Type: "null"}}, Description: v.Description}
		}
	}
}

func TestSchemasAreCurrent(t *testing.T) {
	for _, v := range documents() {
		kind := kindOf(v)
		got, err := schemaFor(v)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		file := filepath.Join(schemaDir, kind+".json")
		if *update {
			if err := os.MkdirAll(schemaDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (run go test ./internal/cli -run TestSchemasAreCurrent -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is out of date with the Go types: run go test ./internal/cli -run TestSchemasAreCurrent -update", file)
		}
	}
}

// validateDocument checks a printed document against its schema in docs/schemas.
func validateDocument(t *testing.T, doc []byte) {
	t.Helper()
	var head struct{ APIVersion string }
	if err := json.Unmarshal(doc, &head); err != nil || head.APIVersion != APIVersion {
		t.Errorf("apiVersion %q (%v), want %s", head.APIVersion, err, APIVersion)
	}
	if _, err := schema.Validate(doc); err != nil {
		t.Error(err)
	}
}

func TestDocumentsCarryTheirVersionAndMatchTheirSchemas(t *testing.T) {
	_, p, err := (&engine.Template{Options: engine.InstallOptions{Profile: "gke"}, KubeVersion: "1.33"}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	gpu := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gke-c-gpu-pool-1a2b3c4d-x1y2",
		Labels: map[string]string{"cloud.google.com/gke-accelerator": "nvidia-l4", "cloud.google.com/gke-nodepool": "gpu-pool"}},
		Spec: corev1.NodeSpec{ProviderID: "gce://p/us-central1-a/gke-c-gpu-pool-1a2b3c4d-x1y2"},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.33.5-gke.1000000", OSImage: "Container-Optimized OS from Google", ContainerRuntimeVersion: "containerd://2.0.6"}}}
	det := detect.Analyze(&detect.Snapshot{Nodes: []corev1.Node{gpu}})
	rep := preflight.Report{Results: []preflight.Result{{ID: "api", Category: "cluster", Description: "the API server answers", Status: preflight.StatusPass, Message: "Kubernetes v1.33.5"}}}
	res := &engine.InstallResult{Detection: &det, Plan: p, Preflight: &rep, Changed: true,
		Steps:       []runner.StepResult{{ID: "namespace", Title: "Namespace gpu-operator", Outcome: event.StepSucceeded}},
		Interrupted: &runner.InterruptedError{Count: 13, InFlight: &runner.StepResult{ID: "crds", Outcome: event.StepInterrupted, Message: "3/6 CRDs established"}}}
	for _, v := range []any{p, &det, &rep, res} {
		var b bytes.Buffer
		if err := writeJSON(&b, v); err != nil {
			t.Fatal(err)
		}
		validateDocument(t, b.Bytes())
	}
	if k := kindOf([]detect.GPUNode{}); k != "GPUNodeList" {
		t.Errorf("kind of a list = %q", k)
	}
}
