package plan

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestBuildVerify(t *testing.T) {
	const img = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
	for _, tc := range []struct {
		name string
		in   VerifyInput
		want *VerifyPlan
	}{
		{
			name: "one pod per GPU node, in node order, each deleted at the end",
			in:   VerifyInput{Namespace: "gpu-operator", Image: img, Nodes: []string{"gpu-2", "gpu-1"}, RunID: "abc123"},
			want: &VerifyPlan{RunID: "abc123", Namespace: "gpu-operator", Image: img,
				Create: []VerifyPod{
					{Namespace: "gpu-operator", Name: "gpuctl-verify-gpu-1-abc123", Node: "gpu-1", Image: img, Resource: VerifyGPUResource},
					{Namespace: "gpu-operator", Name: "gpuctl-verify-gpu-2-abc123", Node: "gpu-2", Image: img, Resource: VerifyGPUResource},
				},
				DeleteAtEnd: []string{"gpuctl-verify-gpu-1-abc123", "gpuctl-verify-gpu-2-abc123"}},
		},
		{
			name: "the pods earlier runs left are deleted first, by UID, with why",
			in: VerifyInput{Namespace: "gpu-operator", Image: img, ImagePullSecrets: []string{"mirror"}, Nodes: []string{"gpu-1"}, RunID: "abc123",
				Earlier: []VerifyPodRef{
					{Namespace: "gpu-operator", Name: "gpuctl-verify-gpu-1-ffffff", UID: "uid-2", Run: "ffffff"},
					{Namespace: "gpu-operator", Name: "gpuctl-verify-gpu-1-eeeeee", UID: "uid-1"},
				}},
			want: &VerifyPlan{RunID: "abc123", Namespace: "gpu-operator", Image: img, ImagePullSecrets: []string{"mirror"},
				Delete: []VerifyDeletion{
					{Namespace: "gpu-operator", Name: "gpuctl-verify-gpu-1-eeeeee", UID: "uid-1", Why: "left by an earlier verify run"},
					{Namespace: "gpu-operator", Name: "gpuctl-verify-gpu-1-ffffff", UID: "uid-2", Why: "left by an earlier verify run (ffffff)"},
				},
				Create:      []VerifyPod{{Namespace: "gpu-operator", Name: "gpuctl-verify-gpu-1-abc123", Node: "gpu-1", Image: img, Resource: VerifyGPUResource}},
				DeleteAtEnd: []string{"gpuctl-verify-gpu-1-abc123"}},
		},
		{
			name: "node names become hostnames of at most 63 characters, and two that collide stay apart",
			in: VerifyInput{Namespace: "ns", Image: img, RunID: "abc123", Nodes: []string{
				"ip-10-0-1-23.eu-west-1.compute.internal", "a.b", "a-b", "a-b", strings.Repeat("n", 80)}},
			want: &VerifyPlan{RunID: "abc123", Namespace: "ns", Image: img,
				Create: []VerifyPod{
					{Namespace: "ns", Name: "gpuctl-verify-a-b-abc123", Node: "a-b", Image: img, Resource: VerifyGPUResource},
					{Namespace: "ns", Name: "gpuctl-verify-a-b-2-abc123", Node: "a.b", Image: img, Resource: VerifyGPUResource},
					{Namespace: "ns", Name: "gpuctl-verify-ip-10-0-1-23-eu-west-1-compute-internal-abc123", Node: "ip-10-0-1-23.eu-west-1.compute.internal", Image: img, Resource: VerifyGPUResource},
					{Namespace: "ns", Name: "gpuctl-verify-" + strings.Repeat("n", 42) + "-abc123", Node: strings.Repeat("n", 80), Image: img, Resource: VerifyGPUResource},
				},
				DeleteAtEnd: []string{"gpuctl-verify-a-b-abc123", "gpuctl-verify-a-b-2-abc123",
					"gpuctl-verify-ip-10-0-1-23-eu-west-1-compute-internal-abc123", "gpuctl-verify-" + strings.Repeat("n", 42) + "-abc123"}},
		},
		{
			name: "each pod asks for what its node offers: a MIG resource, or a claim from one template per run on the DRA class",
			in: VerifyInput{Namespace: "ns", Image: img, RunID: "abc123", Nodes: []string{"a100", "dra-1", "dra-2", "l4"},
				Requests: map[string]VerifyRequest{"a100": {Resource: "nvidia.com/mig-1g.5gb"}, "dra-1": {DeviceClass: "gpu.nvidia.com"},
					"dra-2": {DeviceClass: "gpu.nvidia.com"}, "l4": {Resource: VerifyGPUResource}},
				EarlierClaimTemplates: []VerifyPodRef{{Namespace: "ns", Name: "gpuctl-verify-ffffff", UID: "uid-9", Run: "ffffff"}}},
			want: &VerifyPlan{RunID: "abc123", Namespace: "ns", Image: img,
				DeleteClaimTemplates: []VerifyDeletion{{Namespace: "ns", Name: "gpuctl-verify-ffffff", UID: "uid-9", Why: "left by an earlier verify run (ffffff)"}},
				ClaimTemplates:       []VerifyClaimTemplate{{Namespace: "ns", Name: "gpuctl-verify-abc123", DeviceClass: "gpu.nvidia.com"}},
				Create: []VerifyPod{
					{Namespace: "ns", Name: "gpuctl-verify-a100-abc123", Node: "a100", Image: img, Resource: "nvidia.com/mig-1g.5gb"},
					{Namespace: "ns", Name: "gpuctl-verify-dra-1-abc123", Node: "dra-1", Image: img, ClaimTemplate: "gpuctl-verify-abc123"},
					{Namespace: "ns", Name: "gpuctl-verify-dra-2-abc123", Node: "dra-2", Image: img, ClaimTemplate: "gpuctl-verify-abc123"},
					{Namespace: "ns", Name: "gpuctl-verify-l4-abc123", Node: "l4", Image: img, Resource: VerifyGPUResource},
				},
				DeleteAtEnd:               []string{"gpuctl-verify-a100-abc123", "gpuctl-verify-dra-1-abc123", "gpuctl-verify-dra-2-abc123", "gpuctl-verify-l4-abc123"},
				DeleteClaimTemplatesAtEnd: []string{"gpuctl-verify-abc123"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := BuildVerify(tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				g, _ := json.MarshalIndent(got, "", "  ")
				w, _ := json.MarshalIndent(tc.want, "", "  ")
				t.Errorf("plan:\n%s\nwant:\n%s", g, w)
			}
			for _, c := range got.Create {
				if len(c.Name) > 63 {
					t.Errorf("pod name %q is %d characters", c.Name, len(c.Name))
				}
			}
		})
	}
}

// The plan's JSON field names are an interface (gpuctl verify --dry-run -o json): they stay.
func TestVerifyPlanFieldNames(t *testing.T) {
	p := BuildVerify(VerifyInput{Namespace: "ns", Image: "img", ImagePullSecrets: []string{"s"}, Nodes: []string{"n"}, RunID: "r",
		Earlier: []VerifyPodRef{{Namespace: "ns", Name: "old", UID: "u"}}})
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"runID":"r","namespace":"ns","image":"img","imagePullSecrets":["s"],` +
		`"delete":[{"namespace":"ns","name":"old","uid":"u","why":"left by an earlier verify run"}],` +
		`"create":[{"namespace":"ns","name":"gpuctl-verify-n-r","node":"n","image":"img","resource":"nvidia.com/gpu"}],"deleteAtEnd":["gpuctl-verify-n-r"]}`
	if string(b) != want {
		t.Errorf("JSON:\n%s\nwant:\n%s", b, want)
	}
}

func TestVerifyRunID(t *testing.T) {
	base := VerifyInput{Namespace: "gpu-operator", Image: "img", Nodes: []string{"gpu-1", "gpu-2"}}
	id := VerifyRunID(base)
	for _, tc := range []struct {
		name string
		in   VerifyInput
		same bool
	}{
		{"the same inputs in another order give the same ID", VerifyInput{Namespace: "gpu-operator", Image: "img", Nodes: []string{"gpu-2", "gpu-1"}}, true},
		{"another node set gives another", VerifyInput{Namespace: "gpu-operator", Image: "img", Nodes: []string{"gpu-1"}}, false},
		{"another image gives another", VerifyInput{Namespace: "gpu-operator", Image: "img2", Nodes: []string{"gpu-1", "gpu-2"}}, false},
		{"nvidia.com/gpu asked for on every node gives the same", VerifyInput{Namespace: "gpu-operator", Image: "img", Nodes: []string{"gpu-1", "gpu-2"},
			Requests: map[string]VerifyRequest{"gpu-1": {Resource: VerifyGPUResource}}}, true},
		{"a MIG resource asked for gives another", VerifyInput{Namespace: "gpu-operator", Image: "img", Nodes: []string{"gpu-1", "gpu-2"},
			Requests: map[string]VerifyRequest{"gpu-1": {Resource: "nvidia.com/mig-1g.5gb"}}}, false},
		{"a ResourceClaimTemplate an earlier run left gives another", VerifyInput{Namespace: "gpu-operator", Image: "img", Nodes: []string{"gpu-1", "gpu-2"},
			EarlierClaimTemplates: []VerifyPodRef{{Namespace: "gpu-operator", Name: "gpuctl-verify-" + id, UID: "u"}}}, false},
		{"a pod an earlier run left gives another", VerifyInput{Namespace: "gpu-operator", Image: "img", Nodes: []string{"gpu-1", "gpu-2"},
			Earlier: []VerifyPodRef{{Namespace: "gpu-operator", Name: "gpuctl-verify-gpu-1-" + id, UID: "u"}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := VerifyRunID(tc.in)
			if (got == id) != tc.same || len(got) != 6 {
				t.Errorf("ID %q against %q: same = %v, want %v", got, id, got == id, tc.same)
			}
		})
	}
}
