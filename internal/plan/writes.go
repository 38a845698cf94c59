package plan

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/internal/taint"
)

// Writes is every write a Plan's run makes, listed before the first one (`gpuctl install --dry-run
// -o json` prints it as the Plan's writes): the objects it applies and deletes, the CRDs, each Helm
// release's operation, each node's taint, and gpuctl's own Lease and record. What the run then writes
// is this list, and, for the writes that depend on what the run finds, the rules NodeRule and Rules
// state. Objects the operator or NFD create themselves (operands, node labels) are not gpuctl's
// writes. Field names are stable (docs/schemas/Plan.json).
type Writes struct {
	// Objects are the objects applied: each objects step's, and each release's manifest (a release
	// that is unchanged writes none of them).
	Objects []ObjectWrite `json:"objects"`
	// Deletes are the objects an upgraded release no longer renders, which Helm deletes, by UID.
	Deletes []ObjectDelete `json:"deletes,omitempty"`
	// CRDs are the CRDs applied before the releases, each with what applying it does.
	CRDs []CRDWrite `json:"crds"`
	// Releases are the Helm release operations.
	Releases []ReleaseWrite `json:"releases"`
	// Nodes are the taints added, per node known now.
	Nodes []NodeChange `json:"nodes"`
	// Labels are the node labels the node-labels steps (--sharing, --mig) write, per node known now.
	Labels []LabelWrite `json:"labels,omitempty"`
	// NodeRule, when set, is the rule by which the taint step also taints nodes not known now.
	NodeRule string `json:"nodeRule,omitempty"`
	// Rules are other writes that depend on what the run finds, each with its condition.
	Rules []string `json:"rules,omitempty"`
	// Bookkeeping are gpuctl's own objects: the install Lease and the install record.
	Bookkeeping []ObjectWrite `json:"bookkeeping"`
}

// Write actions of objects and CRDs.
const (
	WriteCreate    = "create"
	WriteUpdate    = "update"
	WriteUnchanged = "unchanged"
	// WriteApply: applied, and whether that changes the object is known only then (its kind is not
	// served yet, or it is an OpenShift object OLM fills in).
	WriteApply = "apply"
	// WriteKeep: a CRD left as it is because applying gpuctl's would narrow or downgrade it.
	WriteKeep = "keep"
)

// Helm release operations.
const (
	ReleaseInstall   = "install"
	ReleaseUpgrade   = "upgrade"
	ReleaseUnchanged = "unchanged"
)

// ObjectWrite is an object a step applies.
type ObjectWrite struct {
	// Step is the ID of the step that writes it ("" for bookkeeping).
	Step       string `json:"step,omitempty"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Action is WriteCreate, WriteUpdate, WriteUnchanged or WriteApply.
	Action string `json:"action"`
}

func (o ObjectWrite) String() string {
	return o.Action + " " + describeObject(o.Kind, o.Namespace, o.Name)
}

// ObjectDelete is an object a step deletes, only while it has that UID.
type ObjectDelete struct {
	Step       string    `json:"step"`
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Namespace  string    `json:"namespace,omitempty"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid"`
}

func (o ObjectDelete) String() string {
	return "delete " + describeObject(o.Kind, o.Namespace, o.Name)
}

// CRDWrite is a CRD the crds step applies.
type CRDWrite struct {
	Step string `json:"step"`
	Name string `json:"name"`
	// Action is WriteCreate, WriteUpdate, WriteUnchanged or WriteKeep.
	Action string `json:"action"`
	// Reason says why a CRD is kept.
	Reason string `json:"reason,omitempty"`
}

// ReleaseWrite is a Helm release operation.
type ReleaseWrite struct {
	Step         string `json:"step"`
	Name         string `json:"name"`
	Namespace    string `json:"namespace"`
	Chart        string `json:"chart"`
	ChartVersion string `json:"chartVersion"`
	// Operation is ReleaseInstall, ReleaseUpgrade or ReleaseUnchanged.
	Operation string `json:"operation"`
	// Revision is the revision Helm stores (0 when unchanged); FromRevision is the revision an upgrade
	// starts from, or the unchanged one.
	Revision     int `json:"revision,omitempty"`
	FromRevision int `json:"fromRevision,omitempty"`
	// Recreate names the objects of the deployed revision that are gone from the cluster: the chart and
	// values are unchanged, and the upgrade puts them back.
	Recreate []string `json:"recreate,omitempty"`
}

func (r ReleaseWrite) String() string {
	switch r.Operation {
	case ReleaseInstall:
		return fmt.Sprintf("install %s/%s revision %d (%s %s)", r.Namespace, r.Name, r.Revision, r.Chart, r.ChartVersion)
	case ReleaseUpgrade:
		s := fmt.Sprintf("upgrade %s/%s from revision %d to %d (%s %s)", r.Namespace, r.Name, r.FromRevision, r.Revision, r.Chart, r.ChartVersion)
		if len(r.Recreate) > 0 {
			s += " to recreate " + strings.Join(r.Recreate, ", ")
		}
		return s
	default:
		return fmt.Sprintf("leave %s/%s at revision %d (unchanged)", r.Namespace, r.Name, r.FromRevision)
	}
}

func describeObject(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}

// ReleaseObjects are the writes of a release step with operation op: rendered is the manifest's
// objects Helm would apply (namespaces filled in), deployed the deployed revision's. An install creates
// every rendered object; an upgrade creates the new ones, updates those whose rendering changed, and
// deletes (returned as gone) the deployed ones no longer rendered; an unchanged release writes nothing.
//
// recreate names ("Kind namespace/name") deployed objects that are gone from the cluster: the upgrade
// creates them even where their rendering is unchanged.
func ReleaseObjects(step, op string, rendered, deployed []*unstructured.Unstructured, recreate []string) (writes []ObjectWrite, gone []*unstructured.Unstructured) {
	if op == ReleaseUnchanged {
		return nil, nil
	}
	key := func(o *unstructured.Unstructured) string {
		return o.GroupVersionKind().GroupKind().String() + " " + o.GetNamespace() + "/" + o.GetName()
	}
	before := map[string]*unstructured.Unstructured{}
	if op == ReleaseUpgrade {
		for _, o := range deployed {
			before[key(o)] = o
		}
	}
	now := map[string]bool{}
	for _, o := range rendered {
		now[key(o)] = true
		w := ObjectWrite{Step: step, APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), Action: WriteCreate}
		if old, ok := before[key(o)]; ok {
			w.Action = WriteUpdate
			if reflect.DeepEqual(old.Object, o.Object) {
				w.Action = WriteUnchanged
			}
			if slices.Contains(recreate, describeObject(w.Kind, w.Namespace, w.Name)) {
				w.Action = WriteCreate
			}
		}
		writes = append(writes, w)
	}
	for _, o := range deployed {
		if op == ReleaseUpgrade && !now[key(o)] {
			gone = append(gone, o)
		}
	}
	return writes, gone
}

// TaintWrites are the taints the plan's taint step adds to the nodes it names (nodes as read now):
// each named node that has no taint of its key and effect gets it. Nothing when the step is skipped.
func TaintWrites(p *Plan, nodes []corev1.Node) []NodeChange {
	s := p.Step("taint")
	if s == nil || s.Skip != "" || s.Taint == nil {
		return nil
	}
	want := corev1.Taint{Key: s.Taint.Key, Value: s.Taint.Value, Effect: corev1.TaintEffect(s.Taint.Effect)}
	var out []NodeChange
	for _, n := range sortedNodes(nodes) {
		if !slices.Contains(s.Taint.Nodes, n.Name) {
			continue
		}
		if c, err := taint.PlanTaint(n, want); err == nil && c.Existing == nil {
			out = append(out, NodeChange{Node: n.Name, Action: ActionAdd, Taints: specs(c.Add)})
		}
	}
	return out
}

// NodeRuleText is the taint step's rule for GPU nodes found during the run.
const NodeRuleText = "and any GPU node NFD labels before the taint step (" + nfdGPULabel + "), unless, with those, every schedulable node is a GPU node (then no node is tainted, or --taint taints them all)"

// nfdGPULabel is NFD's label of a node with an NVIDIA PCI device.
const nfdGPULabel = "feature.node.kubernetes.io/pci-10de.present=true"

// LabelWrite is one node label a node-labels step writes: Value set, or (Remove) gpuctl's earlier
// label taken off.
type LabelWrite struct {
	Step   string `json:"step"`
	Node   string `json:"node"`
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Remove bool   `json:"remove,omitempty"`
}

func (l LabelWrite) String() string {
	if l.Remove {
		return "label node/" + l.Node + ": remove " + l.Key + " (gpuctl's earlier choice)"
	}
	return "label node/" + l.Node + ": " + l.Key + "=" + l.Value
}

// Sort orders every list, so that two listings compare line by line.
func (w *Writes) Sort() {
	sort.SliceStable(w.Labels, func(i, j int) bool {
		a, b := w.Labels[i], w.Labels[j]
		return a.Step+" "+a.Node+" "+a.Key < b.Step+" "+b.Node+" "+b.Key
	})
	objKey := func(o ObjectWrite) string { return o.Step + " " + o.Kind + " " + o.Namespace + "/" + o.Name }
	sort.SliceStable(w.Objects, func(i, j int) bool { return objKey(w.Objects[i]) < objKey(w.Objects[j]) })
	sort.SliceStable(w.Deletes, func(i, j int) bool {
		a, b := w.Deletes[i], w.Deletes[j]
		return a.Step+" "+a.Kind+" "+a.Namespace+"/"+a.Name < b.Step+" "+b.Kind+" "+b.Namespace+"/"+b.Name
	})
	sort.SliceStable(w.CRDs, func(i, j int) bool { return w.CRDs[i].Name < w.CRDs[j].Name })
	sort.SliceStable(w.Nodes, func(i, j int) bool { return w.Nodes[i].Node < w.Nodes[j].Node })
}

// Summary is the listing in a few lines for a person: counts by action, each release operation, each
// node's taint and label, and the rules.
func (w *Writes) Summary() []string {
	var objs, crds []string
	for _, o := range w.Objects {
		objs = append(objs, o.Action)
	}
	for _, c := range w.CRDs {
		crds = append(crds, c.Action)
	}
	out := countLine(nil, "objects", objs)
	if len(w.Deletes) > 0 {
		var names []string
		for _, d := range w.Deletes {
			names = append(names, describeObject(d.Kind, d.Namespace, d.Name))
		}
		out = append(out, fmt.Sprintf("delete %d objects: %s", len(w.Deletes), strings.Join(names, ", ")))
	}
	out = countLine(out, "CRDs", crds)
	for _, r := range w.Releases {
		out = append(out, "release: "+r.String())
	}
	out = append(out, w.nodeLines()...)
	for _, r := range w.Rules {
		out = append(out, "and "+r)
	}
	for _, b := range w.Bookkeeping {
		out = append(out, b.String()+" (gpuctl's own)")
	}
	return out
}

// countLine appends "N what: n create, n update, …" to out, where there are any actions.
func countLine(out []string, what string, actions []string) []string {
	if len(actions) == 0 {
		return out
	}
	n := map[string]int{}
	for _, a := range actions {
		n[a]++
	}
	var parts []string
	for _, a := range []string{WriteCreate, WriteUpdate, WriteApply, WriteUnchanged, WriteKeep} {
		if n[a] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[a], a))
		}
	}
	return append(out, fmt.Sprintf("%d %s: %s", len(actions), what, strings.Join(parts, ", ")))
}

// nodeLines are the node writes: each taint, the taint rule for nodes found during the run, each label.
func (w *Writes) nodeLines() []string {
	var out []string
	for _, n := range w.Nodes {
		out = append(out, "taint "+n.String())
	}
	switch {
	case w.NodeRule != "" && len(w.Nodes) > 0:
		out = append(out, "taint the nodes above "+w.NodeRule)
	case w.NodeRule != "":
		out = append(out, "taint "+strings.TrimPrefix(w.NodeRule, "and "))
	}
	for _, l := range w.Labels {
		out = append(out, l.String())
	}
	return out
}
