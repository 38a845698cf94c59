package kube

import (
	"encoding/json"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MetadataManagers returns the field managers of each label and annotation of an object.
func MetadataManagers(entries []metav1.ManagedFieldsEntry) (labels, annotations map[string][]string) {
	labels, annotations = map[string][]string{}, map[string][]string{}
	for _, e := range entries {
		if e.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Metadata struct {
				Labels      map[string]json.RawMessage `json:"f:labels"`
				Annotations map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if json.Unmarshal(e.FieldsV1.Raw, &fields) != nil {
			continue
		}
		for into, from := range map[*map[string][]string]map[string]json.RawMessage{&labels: fields.Metadata.Labels, &annotations: fields.Metadata.Annotations} {
			for k := range from {
				if key, ok := strings.CutPrefix(k, "f:"); ok && !slices.Contains((*into)[key], e.Manager) {
					(*into)[key] = append((*into)[key], e.Manager)
				}
			}
		}
	}
	return labels, annotations
}
