// Package schema validates the documents gpuctl prints with -o json against the JSON Schemas in
// docs/schemas, for tests.
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"

	validator "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gpuctl/gpuctl/e2e/upstream"
)

// Validate checks a document (apiVersion, kind and the kind's fields) against
// docs/schemas/<kind>.json and returns its kind.
func Validate(doc []byte) (string, error) {
	var head struct{ APIVersion, Kind string }
	if err := json.Unmarshal(doc, &head); err != nil {
		return "", err
	}
	if head.APIVersion == "" || head.Kind == "" {
		return "", fmt.Errorf("document has apiVersion %q, kind %q", head.APIVersion, head.Kind)
	}
	root, err := upstream.RepoRoot()
	if err != nil {
		return head.Kind, err
	}
	sch, err := validator.NewCompiler().Compile(filepath.Join(root, "docs", "schemas", head.Kind+".json"))
	if err != nil {
		return head.Kind, err
	}
	inst, err := validator.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return head.Kind, err
	}
	if err := sch.Validate(inst); err != nil {
		return head.Kind, fmt.Errorf("%s does not match docs/schemas/%s.json: %w", head.Kind, head.Kind, err)
	}
	return head.Kind, nil
}
