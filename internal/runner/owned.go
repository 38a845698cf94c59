package runner

import (
	"github.com/gpuctl/gpuctl/internal/record"
)

// releaseRefs names the releases for record.Provenance.
func releaseRefs(rels []uninstallRelease) []record.ReleaseRef {
	out := make([]record.ReleaseRef, len(rels))
	for i, r := range rels {
		out[i] = record.ReleaseRef{Name: r.name, Namespace: r.namespace}
	}
	return out
}

// describe names an object as kubectl's users read it: "Kind namespace/name" or "Kind name".
func describe(kind, namespace, name string) string {
	if namespace != "" {
		return kind + " " + namespace + "/" + name
	}
	return kind + " " + name
}
