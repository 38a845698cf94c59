package support

import (
	"context"
	"fmt"
	"path"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/gpuctl/gpuctl/internal/kube"
)

// Log bounds: the tail of each container's log, as `kubectl logs --tail 2000 --limit-bytes 1048576`.
const (
	DefaultLogLines = 2000
	DefaultLogBytes = 1 << 20
	// DefaultCallTimeout bounds one API call, so one hung read cannot use up the whole run.
	DefaultCallTimeout = 20 * time.Second
	// logWorkers read container logs concurrently.
	logWorkers = 4
)

// GPUPresentLabel is the operator's mark of a GPU node (NVIDIA/gpu-operator
// controllers/state_manager.go@v26.7.0, nvidia.com/gpu.present).
const GPUPresentLabel = "nvidia.com/gpu.present"

// Collector reads the cluster into a Bundle. Each method is independent: what it cannot read is
// noted in the bundle's manifest and it returns what it could.
type Collector struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Metadata lists Secrets without their data.
	Metadata metadata.Interface
	Bundle   *Bundle
	// CallTimeout bounds each API call (0: DefaultCallTimeout).
	CallTimeout time.Duration
	// LogLines and LogBytes bound each container log (0: the defaults).
	LogLines, LogBytes int64
}

func (c *Collector) call(ctx context.Context) (context.Context, context.CancelFunc) {
	d := c.CallTimeout
	if d <= 0 {
		d = DefaultCallTimeout
	}
	return context.WithTimeout(ctx, d)
}

// NodeFacts is what the bundle keeps of a node: what decides whether GPU workloads land and run.
type NodeFacts struct {
	Name          string                 `json:"name"`
	Labels        map[string]string      `json:"labels,omitempty"`
	Annotations   map[string]string      `json:"annotations,omitempty"`
	Unschedulable bool                   `json:"unschedulable,omitempty"`
	Taints        []corev1.Taint         `json:"taints,omitempty"`
	Capacity      corev1.ResourceList    `json:"capacity,omitempty"`
	Allocatable   corev1.ResourceList    `json:"allocatable,omitempty"`
	Conditions    []corev1.NodeCondition `json:"conditions,omitempty"`
	NodeInfo      corev1.NodeSystemInfo  `json:"nodeInfo"`
}

// Nodes stores the GPU nodes (labelled nvidia.com/gpu.present=true; every node when none is) in
// nodes.yaml and returns them.
func (c *Collector) Nodes(ctx context.Context) []corev1.Node {
	cctx, cancel := c.call(ctx)
	defer cancel()
	list, err := c.Kube.CoreV1().Nodes().List(cctx, metav1.ListOptions{LabelSelector: GPUPresentLabel + "=true"})
	if err != nil {
		c.Bundle.Fail("nodes", err)
		return nil
	}
	what := "GPU nodes (labelled " + GPUPresentLabel + "=true): labels, taints, capacity, allocatable, conditions"
	if len(list.Items) == 0 {
		cctx, cancel := c.call(ctx)
		defer cancel()
		all, err := c.Kube.CoreV1().Nodes().List(cctx, metav1.ListOptions{})
		if err != nil {
			c.Bundle.Fail("nodes", err)
			return nil
		}
		list = all
		what = "every node (none is labelled " + GPUPresentLabel + "=true): labels, taints, capacity, allocatable, conditions"
	}
	facts := make([]NodeFacts, 0, len(list.Items))
	for _, n := range list.Items {
		facts = append(facts, NodeFacts{Name: n.Name, Labels: n.Labels, Annotations: n.Annotations, Unschedulable: n.Spec.Unschedulable,
			Taints: n.Spec.Taints, Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable, Conditions: n.Status.Conditions, NodeInfo: n.Status.NodeInfo})
	}
	c.add("nodes.yaml", what, facts)
	return list.Items
}

func (c *Collector) add(name, what string, v any) {
	if err := c.Bundle.AddObject(name, what, v); err != nil {
		c.Bundle.Fail(name, err)
	}
}

// Resources stores every object of a custom resource (ClusterPolicy, NVIDIADriver) with its status
// in file; a resource the cluster does not serve is noted.
func (c *Collector) Resources(ctx context.Context, gvr schema.GroupVersionResource, file, what string) {
	cctx, cancel := c.call(ctx)
	defer cancel()
	list, err := c.Dynamic.Resource(gvr).List(cctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		c.Bundle.Note("%s: the cluster does not serve %s (CRD not installed)", file, gvr.GroupResource())
		return
	case err != nil:
		c.Bundle.Fail(gvr.GroupResource().String(), err)
		return
	}
	items := make([]map[string]any, 0, len(list.Items))
	for _, o := range list.Items {
		items = append(items, o.Object)
	}
	c.add(file, what, items)
}

// Namespace stores a namespace's pods, DaemonSets, Deployments, events, Secrets' names and types
// (never their data), and the logs of every container of its pods, init containers included.
// The namespace's files are under namespaces/<ns>/.
func (c *Collector) Namespace(ctx context.Context, ns string) []corev1.Pod {
	dir := path.Join("namespaces", ns)
	cctx, cancel := c.call(ctx)
	_, err := c.Kube.CoreV1().Namespaces().Get(cctx, ns, metav1.GetOptions{})
	cancel()
	if apierrors.IsNotFound(err) {
		c.Bundle.Note("namespace %s does not exist", ns)
		return nil
	}
	// Another error (forbidden to get namespaces) does not stop the reads inside it.
	var pods []corev1.Pod
	c.read(ctx, dir, "pods", func(ctx context.Context) (any, string, error) {
		l, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, "", err
		}
		pods = l.Items
		return l.Items, "pods in " + ns + " with their container states", nil
	})
	c.read(ctx, dir, "daemonsets", func(ctx context.Context) (any, string, error) {
		l, err := c.Kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, "", err
		}
		return l.Items, "DaemonSets in " + ns, nil
	})
	c.read(ctx, dir, "deployments", func(ctx context.Context) (any, string, error) {
		l, err := c.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, "", err
		}
		return l.Items, "Deployments in " + ns, nil
	})
	c.read(ctx, dir, "events", func(ctx context.Context) (any, string, error) {
		l, err := c.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, "", err
		}
		sort.SliceStable(l.Items, func(i, j int) bool { return kube.EventTime(&l.Items[i]).Before(kube.EventTime(&l.Items[j])) })
		return l.Items, "events in " + ns + ", oldest first", nil
	})
	c.read(ctx, dir, "secrets", func(ctx context.Context) (any, string, error) { return c.secretNames(ctx, ns) })
	c.logs(ctx, ns, pods)
	return pods
}

// secretNames is Namespace's listing of Secrets: the names and labels of ns's Secrets, never their
// data.
func (c *Collector) secretNames(ctx context.Context, ns string) (any, string, error) {
	// Metadata only (PartialObjectMetadata): the API server sends no data, so none is ever in
	// memory. Annotations are left out too: kubectl's last-applied-configuration holds the data.
	if c.Metadata == nil {
		return nil, "", fmt.Errorf("no metadata client")
	}
	l, err := c.Metadata.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, "", err
	}
	type secretName struct {
		Name    string            `json:"name"`
		Labels  map[string]string `json:"labels,omitempty"`
		Created metav1.Time       `json:"created"`
	}
	out := make([]secretName, 0, len(l.Items))
	for _, s := range l.Items {
		out = append(out, secretName{Name: s.Name, Labels: s.Labels, Created: s.CreationTimestamp})
	}
	return out, "Secrets in " + ns + ": names and labels only, never their data", nil
}

// read runs one listing with the call timeout and stores its result as dir/name.yaml.
func (c *Collector) read(ctx context.Context, dir, name string, list func(context.Context) (any, string, error)) {
	cctx, cancel := c.call(ctx)
	defer cancel()
	v, what, err := list(cctx)
	if err != nil {
		c.Bundle.Fail(path.Join(dir, name), err)
		return
	}
	c.add(path.Join(dir, name+".yaml"), what, v)
}

type logJob struct {
	pod, container string
	previous       bool
}

// logs reads the tail of every container's log (and the previous one's after a restart), a few at a
// time. When the caller may not read pods/log in the namespace, that is noted once.
func (c *Collector) logs(ctx context.Context, ns string, pods []corev1.Pod) {
	jobs := logJobs(pods)
	lines, bytes := c.LogLines, c.LogBytes
	if lines <= 0 {
		lines = DefaultLogLines
	}
	if bytes <= 0 {
		bytes = DefaultLogBytes
	}
	var (
		mu        sync.Mutex
		forbidden bool
		wg        sync.WaitGroup
		next      = make(chan logJob)
	)
	for range logWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				mu.Lock()
				skip := forbidden
				mu.Unlock()
				if skip || ctx.Err() != nil {
					continue
				}
				if err := c.log(ctx, ns, j, lines, bytes); err != nil {
					mu.Lock()
					first := !forbidden
					forbidden = true
					mu.Unlock()
					if first {
						c.Bundle.Fail("pods/log in "+ns, err)
					}
				}
			}
		}()
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
}

// logJobs are the logs to read of pods: every container's and init container's, and the previous
// one's of a container that restarted.
func logJobs(pods []corev1.Pod) []logJob {
	var jobs []logJob
	for _, p := range pods {
		restarts := map[string]int32{}
		for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			restarts[s.Name] = s.RestartCount
		}
		for _, ctr := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			jobs = append(jobs, logJob{pod: p.Name, container: ctr.Name})
			if restarts[ctr.Name] > 0 {
				jobs = append(jobs, logJob{pod: p.Name, container: ctr.Name, previous: true})
			}
		}
	}
	return jobs
}

// log stores the tail of one container log of namespace ns, at most lines lines and bytes bytes, or
// notes why it could not be read. It returns only a refusal (Forbidden), which the caller notes once
// for the namespace.
func (c *Collector) log(ctx context.Context, ns string, j logJob, lines, bytes int64) error {
	name := path.Join("namespaces", ns, "logs", j.pod, j.container+".log")
	what := fmt.Sprintf("log of container %s of pod %s/%s (last %d lines, at most %d bytes)", j.container, ns, j.pod, lines, bytes)
	if j.previous {
		name = path.Join("namespaces", ns, "logs", j.pod, j.container+".previous.log")
		what = "previous " + what
	}
	cctx, cancel := c.call(ctx)
	b, err := c.Kube.CoreV1().Pods(ns).GetLogs(j.pod, &corev1.PodLogOptions{Container: j.container, Previous: j.previous, TailLines: &lines, LimitBytes: &bytes}).DoRaw(cctx)
	cancel()
	switch {
	case apierrors.IsForbidden(err):
		return err
	case err != nil:
		c.Bundle.Fail(name, err)
	default:
		c.Bundle.AddText(name, what, string(b))
	}
	return nil
}
