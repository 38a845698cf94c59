package plan

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/taint"
)

func testNode(name, record string, taints ...corev1.Taint) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}}
	if record != "" {
		n.Annotations = map[string]string{taint.AddedTaintsAnnotation: record}
	}
	return n
}

const gpuRecord = `[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}]`

var (
	usersGPUTaint = corev1.Taint{Key: "nvidia.com/gpu", Value: "reserved", Effect: corev1.TaintEffectNoSchedule}
	dedicated     = corev1.Taint{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}
	gpuSpec       = TaintSpec{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}
)

func TestTaintNodesPlan(t *testing.T) {
	tests := []struct {
		name          string
		nodes         []corev1.Node
		gpu           []string
		d             TaintDecision
		wantChanges   []NodeChange
		wantUnchanged []NodeUnchanged
		wantWarning   string
		wantPodTol    bool
	}{
		{
			name:          "GPU nodes get the taint, others are left alone as not GPU nodes, all sorted by name",
			nodes:         []corev1.Node{testNode("gpu-2", ""), testNode("cpu-1", ""), testNode("gpu-1", "", dedicated)},
			gpu:           []string{"gpu-1", "gpu-2"},
			d:             TaintDecision{Taint: true, Toleration: TolerationPlugin},
			wantChanges:   []NodeChange{{Node: "gpu-1", Action: ActionAdd, Taints: []TaintSpec{gpuSpec}}, {Node: "gpu-2", Action: ActionAdd, Taints: []TaintSpec{gpuSpec}}},
			wantUnchanged: []NodeUnchanged{{Node: "cpu-1", Reason: ReasonNotGPU}},
		},
		{
			name:        "a GPU node already tainted by gpuctl, one by its user with another value: both left alone, saying whose",
			nodes:       []corev1.Node{testNode("gpu-1", gpuRecord, taint.GPUTaint), testNode("gpu-2", "", usersGPUTaint)},
			gpu:         []string{"gpu-1", "gpu-2"},
			d:           TaintDecision{Taint: true, Toleration: TolerationPolicy},
			wantChanges: []NodeChange{},
			wantUnchanged: []NodeUnchanged{
				{Node: "gpu-1", Reason: "already has nvidia.com/gpu=present:NoSchedule (added by gpuctl)"},
				{Node: "gpu-2", Reason: "already has nvidia.com/gpu=reserved:NoSchedule (not gpuctl's: untaint leaves it)"},
			},
		},
		{
			name:          "an edited record: the node is a problem, left alone",
			nodes:         []corev1.Node{testNode("gpu-1", "not json")},
			gpu:           []string{"gpu-1"},
			d:             TaintDecision{Taint: true, Toleration: TolerationPlugin},
			wantChanges:   []NodeChange{},
			wantUnchanged: []NodeUnchanged{{Node: "gpu-1", Reason: "parse annotation gpuctl.io/added-taints on node gpu-1: invalid character 'o' in literal null (expecting 'u')", Problem: true}},
		},
		{
			name:        "where install would not taint by default, the plan warns and names the toleration pods need",
			nodes:       []corev1.Node{testNode("gpu-1", "")},
			gpu:         []string{"gpu-1"},
			d:           TaintDecision{Taint: true, Default: "every schedulable node is a GPU node"},
			wantChanges: []NodeChange{{Node: "gpu-1", Action: ActionAdd, Taints: []TaintSpec{gpuSpec}}},
			wantWarning: "gpuctl install would not taint these nodes by default: every schedulable node is a GPU node",
			wantPodTol:  true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]corev1.Node(nil), tc.nodes...)
			p := TaintNodesPlan(in, tc.gpu, taint.GPUTaint, tc.d, false)
			if !reflect.DeepEqual(in, tc.nodes) {
				t.Error("the plan changed its input")
			}
			if p.Verb != "taint" || *p.Taint != gpuSpec || p.Toleration != tc.d.Toleration {
				t.Errorf("verb %q, taint %v, toleration %q", p.Verb, p.Taint, p.Toleration)
			}
			if !reflect.DeepEqual(p.Changes, tc.wantChanges) {
				t.Errorf("changes %+v\nwant    %+v", p.Changes, tc.wantChanges)
			}
			if !reflect.DeepEqual(p.Unchanged, tc.wantUnchanged) {
				t.Errorf("unchanged %+v\nwant      %+v", p.Unchanged, tc.wantUnchanged)
			}
			if got := strings.Join(p.Warnings, "; "); got != tc.wantWarning {
				t.Errorf("warnings %q, want %q", got, tc.wantWarning)
			}
			if (p.PodToleration == gpuTolerationText) != tc.wantPodTol {
				t.Errorf("pod toleration %q", p.PodToleration)
			}
		})
	}
}

func TestUntaintNodesPlan(t *testing.T) {
	moved := usersGPUTaint // the user changed the value of the taint gpuctl added: theirs now
	nodes := []corev1.Node{
		testNode("gpu-3", gpuRecord, moved),
		testNode("gpu-1", gpuRecord, dedicated, taint.GPUTaint),
		testNode("cpu-1", "", dedicated),
		testNode("gpu-2", "{"),
	}
	p := UntaintNodesPlan(nodes)
	want := []NodeChange{{Node: "gpu-1", Action: ActionRemove, Taints: []TaintSpec{gpuSpec}}, {Node: "gpu-3", Action: ActionForget}}
	if !reflect.DeepEqual(p.Changes, want) {
		t.Errorf("changes %+v\nwant    %+v", p.Changes, want)
	}
	if len(p.Unchanged) != 2 || p.Unchanged[0] != (NodeUnchanged{Node: "cpu-1", Reason: ReasonNoRecord}) || !p.Unchanged[1].Problem {
		t.Errorf("unchanged %+v", p.Unchanged)
	}
	if !strings.Contains(p.Problems(), "node gpu-2: parse annotation") {
		t.Errorf("problems %q", p.Problems())
	}
	if p.Taint != nil || p.Verb != "untaint" {
		t.Errorf("verb %q, taint %v", p.Verb, p.Taint)
	}
}

// The JSON field names are documented (docs/schemas/TaintResult.json); pipelines read them.
func TestNodePlanFieldNames(t *testing.T) {
	p := TaintNodesPlan([]corev1.Node{testNode("gpu-1", ""), testNode("cpu-1", "")}, []string{"gpu-1"}, taint.GPUTaint,
		TaintDecision{Workloads: []TaintWorkload{{Kind: "Deployment", Namespace: "ml", Name: "train", Effect: "stranded", Stranded: true}}}, true)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"verb":"taint","taint":{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"},` +
		`"changes":[{"node":"gpu-1","action":"add","taints":[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}]}],` +
		`"unchanged":[{"node":"cpu-1","reason":"not a GPU node"}],` +
		`"podToleration":"{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}",` +
		`"workloads":[{"kind":"Deployment","namespace":"ml","name":"train","effect":"stranded","stranded":true}],"forced":true}`
	if string(b) != want {
		t.Errorf("json %s\nwant %s", b, want)
	}
	if s := p.Stranded(); len(s) != 1 || s[0].Name != "train" {
		t.Errorf("stranded %v", s)
	}
}
