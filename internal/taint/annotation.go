package taint

import (
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// AddedTaintsAnnotation records, on each node, the taints gpuctl added, as a JSON list of {key, value, effect}.
// Untaint removes exactly these and nothing else.
//
// An annotation rather than a label because the value is structured and not meant for selection; the cost is that
// finding every annotated node takes one LIST of all nodes, which Untaint does once.
const AddedTaintsAnnotation = "gpuctl.io/added-taints"

// record is one entry of AddedTaintsAnnotation. It deliberately leaves out TimeAdded: the identity of a taint is
// its key, value and effect.
type record struct {
	Key    string             `json:"key"`
	Value  string             `json:"value"`
	Effect corev1.TaintEffect `json:"effect"`
}

// Added returns the taints gpuctl recorded as added to node, or nil when the node has no AddedTaintsAnnotation.
// It fails when the annotation is not the JSON gpuctl writes (someone edited it), so callers never guess which
// taints are theirs.
func Added(node *corev1.Node) ([]corev1.Taint, error) {
	raw, ok := node.Annotations[AddedTaintsAnnotation]
	if !ok {
		return nil, nil
	}
	var records []record
	if err := json.Unmarshal([]byte(raw), &records); err != nil {
		return nil, fmt.Errorf("parse annotation %s on node %s: %w", AddedTaintsAnnotation, node.Name, err)
	}
	taints := make([]corev1.Taint, 0, len(records))
	for _, r := range records {
		if r.Key == "" || r.Effect == "" {
			return nil, fmt.Errorf("parse annotation %s on node %s: entry without key or effect", AddedTaintsAnnotation, node.Name)
		}
		taints = append(taints, corev1.Taint{Key: r.Key, Value: r.Value, Effect: r.Effect})
	}
	return taints, nil
}

// encodeAdded renders taints as the annotation value: sorted and without duplicates, so the same set always gives
// the same string and a re-run does not rewrite the node.
func encodeAdded(taints []corev1.Taint) (string, error) {
	records := make([]record, 0, len(taints))
	seen := make(map[record]bool, len(taints))
	for _, t := range taints {
		r := record{Key: t.Key, Value: t.Value, Effect: t.Effect}
		if !seen[r] {
			seen[r] = true
			records = append(records, r)
		}
	}
	sort.Slice(records, func(i, j int) bool {
		a, b := records[i], records[j]
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		if a.Effect != b.Effect {
			return a.Effect < b.Effect
		}
		return a.Value < b.Value
	})
	data, err := json.Marshal(records)
	if err != nil {
		return "", fmt.Errorf("encode annotation %s: %w", AddedTaintsAnnotation, err)
	}
	return string(data), nil
}
