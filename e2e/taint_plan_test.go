package e2e

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/taint"
)

// taintDoc is the document `gpuctl taint|untaint -o json` prints (docs/schemas/TaintResult.json), read
// by its documented field names rather than through gpuctl's Go types, as a pipeline reads it.
type taintDoc struct {
	Kind string `json:"kind"`
	Plan struct {
		Verb      string           `json:"verb"`
		Changes   []taintDocChange `json:"changes"`
		Unchanged []struct {
			Node   string `json:"node"`
			Reason string `json:"reason"`
		} `json:"unchanged"`
		Warnings []string `json:"warnings"`
	} `json:"plan"`
	DryRun  bool             `json:"dryRun"`
	Done    []taintDocChange `json:"done"`
	NotDone []struct {
		Node   string `json:"node"`
		Reason string `json:"reason"`
	} `json:"notDone"`
}

type taintDocChange struct {
	Node   string `json:"node"`
	Action string `json:"action"`
	Taints []struct {
		Key    string `json:"key"`
		Value  string `json:"value"`
		Effect string `json:"effect"`
	} `json:"taints"`
}

// taintJSON runs gpuctl with args and -o json, and reads the document.
func taintJSON(t *testing.T, c *sandbox.Cluster, args ...string) taintDoc {
	t.Helper()
	code, stdout, stderr := gpuctl(t, c, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("gpuctl %v exited %d:\n%s", args, code, stderr)
	}
	var doc taintDoc
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("gpuctl %v -o json: %v\n%s", args, err, stdout)
	}
	if doc.Kind != "TaintResult" {
		t.Errorf("gpuctl %v -o json: kind %q", args, doc.Kind)
	}
	return doc
}

// changesSeen are the taint changes between two readings of every node's taints, in the documents'
// shape: per node, the taints added ("add") and those removed ("remove"), sorted by node.
func changesSeen(before, after map[string][]corev1.Taint) []string {
	var out []string
	diff := func(node, action string, a, b []corev1.Taint) {
		var ts []string
		for _, x := range b {
			if !slices.Contains(a, x) {
				ts = append(ts, x.Key+"="+x.Value+":"+string(x.Effect))
			}
		}
		if len(ts) > 0 {
			sort.Strings(ts)
			out = append(out, node+" "+action+" "+strings.Join(ts, ","))
		}
	}
	for node, b := range before {
		diff(node, "add", b, after[node])
		diff(node, "remove", after[node], b)
	}
	for node, a := range after {
		if _, ok := before[node]; !ok {
			diff(node, "add", nil, a)
		}
	}
	sort.Strings(out)
	return out
}

// listed are a document's changes in changesSeen's form.
func listed(cs []taintDocChange) []string {
	var out []string
	for _, c := range cs {
		var ts []string
		for _, x := range c.Taints {
			ts = append(ts, x.Key+"="+x.Value+":"+x.Effect)
		}
		sort.Strings(ts)
		out = append(out, c.Node+" "+c.Action+" "+strings.Join(ts, ","))
	}
	sort.Strings(out)
	return out
}

// TestTaintPlan (gpuctl issue 21): `gpuctl taint` and `gpuctl untaint` do exactly what their dry run
// lists: `--dry-run -o json` names each node's taint change and the nodes left alone with why, writes
// nothing, and the run then changes those nodes' taints, and no other, as read back from the API
// server; its own result lists the same changes. A GPU node that carries a user's nvidia.com/gpu taint
// is left alone by both. A taint that would strand a running workload is refused before anything is
// written (exit 5, naming it and the ways out).
func TestTaintPlan(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 3, CPUNodes: 1, NFDLabels: true}, NoOperator: true})
	ctx := t.Context()
	gpuNodes := simulatedGPUNodes(c)
	// The user fenced one GPU node themselves, with another value: it is theirs, taint leaves it as it
	// is and untaint never removes it.
	users := corev1.Taint{Key: "nvidia.com/gpu", Value: "reserved", Effect: corev1.TaintEffectNoSchedule}
	fenced := gpuNodes[len(gpuNodes)-1]
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"taints": []corev1.Taint{users}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kube.CoreV1().Nodes().Patch(ctx, fenced, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-taint"}); err != nil {
		t.Fatal(err)
	}

	t.Run("a taint that would strand a running Deployment is refused before anything is written, exit 5", func(t *testing.T) {
		pinned := createDeployment(t, c, "pinned", corev1.PodSpec{
			NodeSelector: map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true"},
			Containers:   []corev1.Container{{Name: "pinned", Image: "nginx"}},
		})
		waitPodsReady(t, c, "default", "app=pinned", 1)
		defer func() {
			if err := c.Kube.AppsV1().Deployments("default").Delete(ctx, pinned.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}()
		before := clusterState(t, c)
		code, _, stderr := gpuctl(t, c, "taint")
		if code != cli.ExitPreflight {
			t.Errorf("taint exited %d, want %d:\n%s", code, cli.ExitPreflight, stderr)
		}
		for _, want := range []string{"Deployment default/pinned", "--force", "{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}", "Nothing was changed"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr does not name %q:\n%s", want, stderr)
			}
		}
		assertUnchanged(t, before, clusterState(t, c))
	})

	for _, verb := range []string{"taint", "untaint"} {
		t.Run(verb+" changes exactly what its dry run lists", func(t *testing.T) {
			if verb == "untaint" {
				taintJSON(t, c, "taint") // something to untaint, whether or not the subtest before ran
			}
			before := taintsByNode(t, c)
			dry := taintJSON(t, c, verb, "--dry-run")
			if !dry.DryRun || dry.Plan.Verb != verb || len(dry.Done) != 0 {
				t.Errorf("dry run: dryRun %v, verb %q, done %v", dry.DryRun, dry.Plan.Verb, dry.Done)
			}
			if got := taintsByNode(t, c); !reflect.DeepEqual(before, got) {
				t.Fatalf("the dry run changed taints:\n%v\n%v", before, got)
			}
			plan := listed(dry.Plan.Changes)
			if len(plan) == 0 {
				t.Fatalf("the dry run lists no change: %+v", dry.Plan)
			}

			run := taintJSON(t, c, verb)
			after := taintsByNode(t, c)
			if seen := changesSeen(before, after); !reflect.DeepEqual(seen, plan) {
				t.Errorf("the API server shows\n  %v\nthe dry run listed\n  %v", seen, plan)
			}
			if done := listed(run.Done); !reflect.DeepEqual(done, plan) {
				t.Errorf("the run reports\n  %v\nthe dry run listed\n  %v", done, plan)
			}
			if len(run.NotDone) != 0 {
				t.Errorf("not done: %v", run.NotDone)
			}
			if !slices.Contains(after[fenced], users) || slices.Contains(after[fenced], taint.GPUTaint) {
				t.Errorf("the user's node %s: %v", fenced, after[fenced])
			}
			reasons := map[string]string{}
			for _, u := range dry.Plan.Unchanged {
				reasons[u.Node] = u.Reason
			}
			for _, n := range c.Nodes {
				name := n.Node.Name
				inPlan := slices.ContainsFunc(dry.Plan.Changes, func(ch taintDocChange) bool { return ch.Node == name })
				if _, left := reasons[name]; left == inPlan {
					t.Errorf("node %s: in the changes %v, left alone %v (%q); want one of them", name, inPlan, left, reasons[name])
				}
			}
			if verb == "taint" && !strings.Contains(reasons[fenced], "nvidia.com/gpu=reserved:NoSchedule") {
				t.Errorf("the user's node is left alone because %q", reasons[fenced])
			}

			again := taintJSON(t, c, verb, "--dry-run")
			if len(again.Plan.Changes) != 0 {
				t.Errorf("a second %s would change %v", verb, listed(again.Plan.Changes))
			}
		})
	}
}
