package render

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"sigs.k8s.io/yaml"
)

// ObjectDiff is how one rendered object of a release changes.
type ObjectDiff struct {
	Release string `json:"release"`
	// Object is "Kind namespace/name" (or "Kind name" for a cluster-scoped object).
	Object string `json:"object"`
	// Change is added, removed or changed.
	Change string `json:"change"`
	// Diff is a unified diff of the object's YAML (empty for nothing changed).
	Diff string `json:"diff"`
}

// manifestObjects splits a Helm manifest into its objects, keyed by "Kind namespace/name".
func manifestObjects(manifest string) (map[string]string, error) {
	out := map[string]string{}
	for _, doc := range strings.Split(manifest, "\n---") {
		// Helm's "# Source: chart/templates/x.yaml" comment is not part of the object.
		var lines []string
		for _, l := range strings.Split(doc, "\n") {
			if strings.HasPrefix(l, "# Source:") || strings.TrimSpace(l) == "---" {
				continue
			}
			lines = append(lines, l)
		}
		body := strings.TrimSpace(strings.Join(lines, "\n"))
		if body == "" {
			continue
		}
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(body), &head); err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
		if head.Kind == "" {
			continue
		}
		key := head.Kind + " " + head.Metadata.Name
		if head.Metadata.Namespace != "" {
			key = head.Kind + " " + head.Metadata.Namespace + "/" + head.Metadata.Name
		}
		out[key] = body + "\n"
	}
	return out, nil
}

// DiffManifests compares a release's deployed manifest with its new rendering, object by object: the
// ClusterPolicy first (what the operator reconciles), then the others by kind and name. Objects that
// render the same are left out.
func DiffManifests(releaseName, from, to string) ([]ObjectDiff, error) {
	a, err := manifestObjects(from)
	if err != nil {
		return nil, err
	}
	b, err := manifestObjects(to)
	if err != nil {
		return nil, err
	}
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var names []string
	for k := range keys {
		names = append(names, k)
	}
	slices.SortFunc(names, func(x, y string) int {
		px, py := strings.HasPrefix(x, "ClusterPolicy "), strings.HasPrefix(y, "ClusterPolicy ")
		switch {
		case px && !py:
			return -1
		case py && !px:
			return 1
		}
		return strings.Compare(x, y)
	})
	var out []ObjectDiff
	for _, k := range names {
		before, after := a[k], b[k]
		if before == after {
			continue
		}
		change := "changed"
		switch {
		case before == "":
			change = "added"
		case after == "":
			change = "removed"
		}
		d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(before), B: difflib.SplitLines(after),
			FromFile: "deployed " + k, ToFile: "upgrade " + k, Context: 3,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, ObjectDiff{Release: releaseName, Object: k, Change: change, Diff: d})
	}
	return out, nil
}
