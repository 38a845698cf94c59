package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/client-go/dynamic"
)

// storedLosses names the stored objects of the CRD's kind that would lose fields or be refused once
// want replaces have, reading them in each of versions: "ClusterPolicy cluster-policy (pruned:
// spec.driver.custom)", "ClusterPolicy p (refused: spec.driver.version in body should match '^v')".
//
// The API server offers no way to ask this: a dry-run update of a custom resource is validated against
// the CRD it stores, not a proposed one, and a dry-run update of the CRD does not look at its objects
// (the API server prunes and validates custom resources only when they are read or written). So this
// runs the API server's own code on each stored object, as it would once want is stored: pruning
// against want's structural schema, then dropping nulls and defaulting (what every read from storage
// does, k8s.io/apiextensions-apiserver pkg/apiserver customresource_handler.go), then the OpenAPI
// schema validator, the embedded-object, list-type and CEL (x-kubernetes-validations) checks a create
// runs (pkg/registry/customresource strategy.go). That package itself is not imported: it brings the
// API server's storage layer with it. An object is refused as a create would refuse it; an update
// that leaves the offending value alone passes (validation ratcheting), a restore or re-create does
// not. Only what ours prunes or refuses beyond have counts, so an object already invalid under have
// is not ours to report.
func storedLosses(ctx context.Context, dyn dynamic.Interface, have, want *apiextensionsv1.CustomResourceDefinition, versions []string) ([]string, error) {
	var out []string
	for _, v := range versions {
		theirs, err := versionSchema(have, v)
		if err != nil {
			return nil, fmt.Errorf("installed schema of %s: %w", v, err)
		}
		ours, err := versionSchema(want, v)
		if err != nil {
			return nil, fmt.Errorf("our schema of %s: %w", v, err)
		}
		gvr := schema.GroupVersionResource{Group: want.Spec.Group, Version: v, Resource: want.Spec.Names.Plural}
		opts := metav1.ListOptions{Limit: 500}
		for {
			list, err := dyn.Resource(gvr).List(ctx, opts)
			if apierrors.IsForbidden(err) {
				// Without the objects nothing says ours loses nothing: keep theirs.
				return []string{fmt.Sprintf("%s (could not be listed: forbidden)", gvr.GroupResource())}, nil
			}
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", gvr.GroupResource(), err)
			}
			for i := range list.Items {
				if why := objectLoss(ctx, theirs, ours, list.Items[i].Object); why != "" {
					r := fmt.Sprintf("%s %s (%s)", want.Spec.Names.Kind, objectName(&list.Items[i]), why)
					if !slices.Contains(out, r) {
						out = append(out, r)
					}
				}
			}
			if opts.Continue = list.GetContinue(); opts.Continue == "" {
				break
			}
		}
	}
	return out, nil
}

func objectName(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetName()
}

// crSchema is one version's schema as the API server uses it for custom resources.
type crSchema struct {
	structural *structuralschema.Structural
	validator  validation.SchemaValidator
	cel        *cel.Validator // nil: no x-kubernetes-validations
}

func versionSchema(crd *apiextensionsv1.CustomResourceDefinition, version string) (*crSchema, error) {
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			return newCRSchema(v.Schema.OpenAPIV3Schema)
		}
	}
	return nil, fmt.Errorf("no schema for version %s", version)
}

func newCRSchema(s *apiextensionsv1.JSONSchemaProps) (*crSchema, error) {
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(s, internal, nil); err != nil {
		return nil, err
	}
	st, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, err
	}
	st = st.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(st); err != nil {
		return nil, err
	}
	v, _, err := validation.NewSchemaValidator(internal)
	if err != nil {
		return nil, err
	}
	return &crSchema{structural: st, validator: v, cel: cel.NewValidator(st, true, celconfig.PerCallLimit)}, nil
}

// read does to a copy of obj what the API server does to an object it reads from storage, and
// returns the copy and the paths it pruned.
func (c *crSchema) read(obj map[string]any) (map[string]any, []string) {
	obj = runtime.DeepCopyJSON(obj)
	pruned := pruning.PruneWithOptions(obj, c.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, c.structural)
	structuraldefaulting.Default(obj, c.structural)
	return obj, pruned
}

// refusals validates obj as the API server validates a create.
func (c *crSchema) refusals(ctx context.Context, obj map[string]any) field.ErrorList {
	errs := validation.ValidateCustomResource(nil, obj, c.validator)
	errs = append(errs, objectmeta.Validate(ctx, nil, obj, c.structural, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, c.structural, obj)...)
	if c.cel != nil && len(errs) == 0 {
		// The API server skips the rules of an object the schema already refuses.
		celErrs, _ := c.cel.Validate(ctx, nil, c.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	return errs
}

// objectLoss says what ours would prune from or refuse in a stored object that theirs keeps and
// accepts, or "".
func objectLoss(ctx context.Context, theirs, ours *crSchema, obj map[string]any) string {
	tObj, tPruned := theirs.read(obj)
	oObj, oPruned := ours.read(obj)
	var pruned []string
	for _, p := range oPruned {
		if !slices.Contains(tPruned, p) {
			pruned = append(pruned, p)
		}
	}
	if len(pruned) > 0 {
		if len(pruned) > 3 {
			pruned = append(pruned[:3], fmt.Sprintf("and %d more", len(pruned)-3))
		}
		return "pruned: " + strings.Join(pruned, ", ")
	}
	known := map[string]bool{}
	for _, e := range theirs.refusals(ctx, tObj) {
		known[e.Error()] = true
	}
	for _, e := range ours.refusals(ctx, oObj) {
		if !known[e.Error()] {
			return "refused: " + clip(refusal(e), 120)
		}
	}
	return ""
}

// refusal says what is refused where, once: the schema validator's details name the path already.
func refusal(e *field.Error) string {
	switch {
	case e.Detail == "":
		return e.Error()
	case strings.HasPrefix(e.Detail, e.Field):
		return e.Detail
	}
	return e.Field + ": " + e.Detail
}
