package health

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuctl/gpuctl/internal/kube"
)

// Bounds that keep a diagnosis short to read and cheap for the API server.
const (
	maxPods         = 20
	maxLogs         = 5
	logTailLines    = 10
	logLimitBytes   = 16 << 10
	eventsPerObject = 3
	messageRunes    = 240
)

// Diagnose explains why the GPU stack is stuck: the named nodes (readiness, taints, GPU labels, allocatable
// GPUs), the pods in namespace that are not Ready (phase, node, init and main container states with reasons and
// exit codes), recent Warning events for those pods, DaemonSets and nodes, the last log lines of a few failing
// containers, and hints for the failure patterns it recognises.
//
// It uses one LIST per kind (nodes, pods, DaemonSets, namespace events, node events), never a GET per object,
// plus at most five log requests. It never fails: what it could not read is listed in Report.Errors. An empty
// namespace skips pods and DaemonSets; no nodes skips nodes.
func Diagnose(ctx context.Context, kube kubernetes.Interface, namespace string, nodes []string) Report {
	d := &diagnosis{ctx: ctx, kube: kube, ns: namespace, names: SortedUniqueNames(nodes)}
	d.report.Namespace = namespace
	d.list()
	d.buildNodes()
	d.buildPods()
	d.buildDaemonSets()
	d.fetchLogs()
	d.report.Hints = d.hints()
	return d.report
}

type diagnosis struct {
	ctx   context.Context
	kube  kubernetes.Interface
	ns    string
	names []string

	nodes      map[string]*corev1.Node
	pods       []corev1.Pod
	daemonSets []appsv1.DaemonSet
	// events are Warning events by involved object "Kind/name".
	events     map[string][]corev1.Event
	seenEvents map[string]bool

	// stuckPods are the pods in the report, in report order, for the hints.
	stuckPods []*corev1.Pod
	// emptyDaemonSets target no node although a GPU node should run them.
	emptyDaemonSets []*appsv1.DaemonSet
	report          Report
}

func (d *diagnosis) fail(what string, err error) {
	d.report.Errors = append(d.report.Errors, fmt.Sprintf("%s: %v", what, err))
}

// list does every LIST the diagnosis needs.
func (d *diagnosis) list() {
	d.events = make(map[string][]corev1.Event)
	d.seenEvents = make(map[string]bool)
	warnings := fields.OneTermEqualSelector("type", corev1.EventTypeWarning)
	if len(d.names) > 0 {
		opts := metav1.ListOptions{}
		if len(d.names) == 1 {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", d.names[0]).String()
		}
		list, err := d.kube.CoreV1().Nodes().List(d.ctx, opts)
		if err != nil {
			d.fail("list nodes", err)
		} else {
			d.nodes = make(map[string]*corev1.Node, len(list.Items))
			for i := range list.Items {
				d.nodes[list.Items[i].Name] = &list.Items[i]
			}
		}
		// Node events are recorded in the default namespace by the kubelet, but other components pick others;
		// list them cluster-wide, selected by kind and type.
		sel := fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.kind", "Node"), warnings)
		evs, err := d.kube.CoreV1().Events(metav1.NamespaceAll).List(d.ctx, metav1.ListOptions{FieldSelector: sel.String()})
		if err != nil {
			d.fail("list node events", err)
		} else {
			d.addEvents(evs.Items, "Node")
		}
	}
	if d.ns == "" {
		return
	}
	pods, err := d.kube.CoreV1().Pods(d.ns).List(d.ctx, metav1.ListOptions{})
	if err != nil {
		d.fail("list pods in "+d.ns, err)
	} else {
		d.pods = pods.Items
	}
	dss, err := d.kube.AppsV1().DaemonSets(d.ns).List(d.ctx, metav1.ListOptions{})
	if err != nil {
		d.fail("list daemonsets in "+d.ns, err)
	} else {
		d.daemonSets = dss.Items
	}
	evs, err := d.kube.CoreV1().Events(d.ns).List(d.ctx, metav1.ListOptions{FieldSelector: warnings.String()})
	if err != nil {
		d.fail("list events in "+d.ns, err)
	} else {
		d.addEvents(evs.Items, "")
	}
}

// addEvents files Warning events of the given kinds ("" for any) by involved object. Events are deduplicated
// by namespace and name because the namespace and node lists overlap when the namespace is "default".
func (d *diagnosis) addEvents(items []corev1.Event, kind string) {
	for _, e := range items {
		// The field selectors asked the server for this already; check again rather than trust every server
		// (and fake) with them.
		if e.Type != corev1.EventTypeWarning || (kind != "" && e.InvolvedObject.Kind != kind) {
			continue
		}
		if e.InvolvedObject.Kind != "Node" && e.InvolvedObject.Namespace != d.ns {
			continue
		}
		id := e.Namespace + "/" + e.Name
		if d.seenEvents[id] {
			continue
		}
		d.seenEvents[id] = true
		key := e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name
		d.events[key] = append(d.events[key], e)
	}
}

// eventsFor returns the most recent Warning events of an object, merged by reason and message.
func (d *diagnosis) eventsFor(kind, name string) []Event {
	merged := make(map[string]*Event)
	for _, e := range d.events[kind+"/"+name] {
		msg := oneLine(e.Message, messageRunes)
		k := e.Reason + "\x00" + msg
		last, count := kube.EventTime(&e), eventCount(e)
		if m, ok := merged[k]; ok {
			m.Count += count
			if last.After(m.Last) {
				m.Last = last
			}
			continue
		}
		merged[k] = &Event{Reason: e.Reason, Message: msg, Count: count, Last: last}
	}
	out := make([]Event, 0, len(merged))
	for _, e := range merged {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Last.Equal(out[j].Last) {
			return out[i].Last.After(out[j].Last)
		}
		return out[i].Reason < out[j].Reason
	})
	if len(out) > eventsPerObject {
		out = out[:eventsPerObject]
	}
	return out
}

func eventCount(e corev1.Event) int32 {
	if e.Series != nil && e.Series.Count > 0 {
		return e.Series.Count
	}
	return max(e.Count, 1)
}

func (d *diagnosis) buildNodes() {
	if d.nodes == nil {
		return // the LIST failed or no nodes were asked for
	}
	for _, name := range d.names {
		n := d.nodes[name]
		if n == nil {
			d.report.Nodes = append(d.report.Nodes, NodeReport{Name: name, Missing: true})
			continue
		}
		r := NodeReport{Name: name, Unschedulable: n.Spec.Unschedulable, Events: d.eventsFor("Node", name)}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				r.Ready = c.Status == corev1.ConditionTrue
				if !r.Ready {
					r.NotReady = oneLine(strings.TrimSuffix(c.Reason+": "+c.Message, ": "), messageRunes)
				}
			}
		}
		for _, t := range n.Spec.Taints {
			r.Taints = append(r.Taints, t.ToString())
		}
		r.GPULabels = gpuLabels(n.Labels)
		if q, ok := n.Status.Allocatable[GPUResource]; ok {
			r.AllocatableGPUs = q.String()
		}
		d.report.Nodes = append(d.report.Nodes, r)
	}
}

// gpuLabels picks the labels that explain a GPU node's state: nvidia.com/gpu.present, NFD's NVIDIA PCI labels,
// and any nvidia.com/gpu.deploy.* label whose value is not "true" (an operand disabled, paused by the driver
// manager, or "pre-installed"; NVIDIA/gpu-operator controllers/state_manager.go@v26.7.0).
func gpuLabels(l map[string]string) []string {
	var out []string
	for k, v := range l {
		switch {
		case k == GPUPresentLabel,
			strings.HasPrefix(k, pciLabelPrefix) && strings.Contains(k, "10de"),
			strings.HasPrefix(k, deployLabelPrefix) && v != "true":
			out = append(out, k+"="+v)
		}
	}
	slices.Sort(out)
	return out
}

func (d *diagnosis) buildPods() {
	var stuck []*corev1.Pod
	for i := range d.pods {
		p := &d.pods[i]
		if p.Status.Phase == corev1.PodSucceeded || podReady(p) {
			continue
		}
		stuck = append(stuck, p)
	}
	onStuckNode := func(p *corev1.Pod) bool { return slices.Contains(d.names, p.Spec.NodeName) }
	slices.SortFunc(stuck, func(a, b *corev1.Pod) int {
		if x, y := onStuckNode(a), onStuckNode(b); x != y {
			if x {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Name, b.Name)
	})
	if len(stuck) > maxPods {
		d.report.MorePods = len(stuck) - maxPods
		stuck = stuck[:maxPods]
	}
	d.stuckPods = stuck
	for _, p := range stuck {
		r := PodReport{Name: p.Name, Node: p.Spec.NodeName, Phase: string(p.Status.Phase), Events: d.eventsFor("Pod", p.Name)}
		r.Reason, r.Message = p.Status.Reason, oneLine(p.Status.Message, messageRunes)
		if c := podCondition(p, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse {
			r.Reason, r.Message = c.Reason, oneLine(c.Message, messageRunes)
		}
		images := containerImages(p)
		for _, s := range p.Status.InitContainerStatuses {
			if t := s.State.Terminated; t != nil && t.ExitCode == 0 {
				continue // completed
			}
			r.InitContainers = append(r.InitContainers, containerReport(s, images))
		}
		for _, s := range p.Status.ContainerStatuses {
			if !s.Ready {
				r.Containers = append(r.Containers, containerReport(s, images))
			}
		}
		d.report.Pods = append(d.report.Pods, r)
	}
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func containerImages(p *corev1.Pod) map[string]string {
	images := make(map[string]string)
	for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		images[c.Name] = c.Image
	}
	return images
}

func containerReport(s corev1.ContainerStatus, images map[string]string) ContainerReport {
	r := ContainerReport{Name: s.Name, Restarts: s.RestartCount, Image: cmp.Or(images[s.Name], s.Image)}
	switch {
	case s.State.Waiting != nil:
		r.State, r.Reason, r.Message = "waiting", s.State.Waiting.Reason, oneLine(s.State.Waiting.Message, messageRunes)
		if t := s.LastTerminationState.Terminated; t != nil {
			// A container in back-off: the exit code of its last run is the useful fact.
			code := t.ExitCode
			r.ExitCode = &code
			if r.Message == "" {
				r.Message = oneLine(t.Message, messageRunes)
			}
		}
	case s.State.Running != nil:
		r.State, r.Since = "running", s.State.Running.StartedAt.Time
	case s.State.Terminated != nil:
		t := s.State.Terminated
		code := t.ExitCode
		r.State, r.Reason, r.Message, r.ExitCode, r.Since = "terminated", t.Reason, oneLine(t.Message, messageRunes), &code, t.FinishedAt.Time
	default:
		r.State = "waiting"
	}
	return r
}

func (d *diagnosis) buildDaemonSets() {
	for i := range d.daemonSets {
		ds := &d.daemonSets[i]
		s := ds.Status
		empty := s.DesiredNumberScheduled == 0 && selectsCoreOperand(ds)
		if empty {
			d.emptyDaemonSets = append(d.emptyDaemonSets, ds)
		}
		if !empty && s.NumberAvailable >= s.DesiredNumberScheduled {
			continue
		}
		var sel []string
		for k, v := range ds.Spec.Template.Spec.NodeSelector {
			sel = append(sel, k+"="+v)
		}
		slices.Sort(sel)
		d.report.DaemonSets = append(d.report.DaemonSets, DaemonSetReport{
			Name: ds.Name, Desired: s.DesiredNumberScheduled, Ready: s.NumberReady, Available: s.NumberAvailable,
			NodeSelector: sel, Events: d.eventsFor("DaemonSet", ds.Name),
		})
	}
	slices.SortFunc(d.report.DaemonSets, func(a, b DaemonSetReport) int { return cmp.Compare(a.Name, b.Name) })
}

// selectsCoreOperand reports whether ds selects nodes by a deploy label every GPU node running the default
// container workload gets (NVIDIA/gpu-operator controllers/state_manager.go@v26.7.0). Such a DaemonSet with 0 desired
// pods means no node has the label. Other operands legitimately target no node (mig-manager without MIG GPUs, the
// driver when a host driver is pre-installed, sandbox operands), so they are left out.
func selectsCoreOperand(ds *appsv1.DaemonSet) bool {
	for k := range ds.Spec.Template.Spec.NodeSelector {
		switch strings.TrimPrefix(k, deployLabelPrefix) {
		case "operator-validator", "device-plugin", "container-toolkit":
			return true
		}
	}
	return false
}

// fetchLogs reads the last lines of at most maxLogs failing containers: crashed ones first, then init containers
// still running (they are what a pod waits on, e.g. the validator's driver-validation).
func (d *diagnosis) fetchLogs() {
	type candidate struct {
		pod, container int // indexes into report.Pods and its InitContainers/Containers
		init           bool
		rank           int
	}
	var cands []candidate
	for i, p := range d.report.Pods {
		for j, c := range p.InitContainers {
			if r, ok := logRank(c, true); ok {
				cands = append(cands, candidate{i, j, true, r})
			}
		}
		for j, c := range p.Containers {
			if r, ok := logRank(c, false); ok {
				cands = append(cands, candidate{i, j, false, r})
			}
		}
	}
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(a.rank, b.rank) })
	if len(cands) > maxLogs {
		cands = cands[:maxLogs]
	}
	for _, c := range cands {
		p := &d.report.Pods[c.pod]
		cr := &p.Containers
		if c.init {
			cr = &p.InitContainers
		}
		ct := &(*cr)[c.container]
		lines, err := d.tail(p.Name, ct.Name)
		if err != nil {
			ct.LogError = oneLine(err.Error(), messageRunes) // tolerated: logs are a bonus
			continue
		}
		ct.Logs = lines
	}
}

// logRank orders containers worth a log read: 0 crashed, 1 a running init container; false means skip (never
// ran, e.g. ImagePullBackOff, or healthy).
func logRank(c ContainerReport, init bool) (int, bool) {
	switch {
	case c.State == "waiting" && c.Reason == "CrashLoopBackOff",
		c.State == "terminated" && c.ExitCode != nil && *c.ExitCode != 0,
		c.State == "waiting" && c.ExitCode != nil && *c.ExitCode != 0:
		return 0, true
	case init && c.State == "running":
		return 1, true
	}
	return 0, false
}

func (d *diagnosis) tail(pod, container string) ([]string, error) {
	tail, limit := int64(logTailLines), int64(logLimitBytes)
	raw, err := d.kube.CoreV1().Pods(d.ns).GetLogs(pod, &corev1.PodLogOptions{
		Container: container, TailLines: &tail, LimitBytes: &limit,
	}).DoRaw(d.ctx)
	if err != nil {
		return nil, fmt.Errorf("logs of %s/%s: %w", pod, container, err)
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	for i, l := range lines {
		lines[i] = oneLine(l, messageRunes)
	}
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return slices.DeleteFunc(lines, func(s string) bool { return s == "" }), nil
}
