// Command bench measures gpuctl against the sandbox, side by side with what it replaces and with the
// API server's own limits, and prints one line per figure with its target:
//
//	go run ./e2e/cmd/bench [-gpu-nodes 500] [-cpu-nodes 2] [-runs 3] [-record docs/performance.md]
//
// Figures: taint and untaint (gpuctl, `kubectl taint -l` when kubectl is on PATH, and a plain
// concurrent client-go patcher with no client-side limiter: the API server's limit); detect (wall time
// and API requests, counted by a round-tripper); template; install (wall time, the control plane's own
// time from the operator release to the last validator Ready, read from pod conditions, gpuctl's
// overhead over it, and the delay from that last Ready to gpuctl's success); gpuctl's peak RSS during
// install (its VmHWM, see peakRSS). gpuctl runs as a binary built the way the release is, as users run
// it. Targets are held here, never as timed assertions in tests.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/e2e/upstream"
	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
)

// benchLabel marks the simulated GPU nodes for `kubectl taint -l`.
const benchLabel = "gpuctl.io/bench-gpu"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	gpuNodes, cpuNodes, runs int
	distro, record, events   string
	skipInstall              bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.IntVar(&o.gpuNodes, "gpu-nodes", 500, "simulated GPU nodes")
	fs.IntVar(&o.cpuNodes, "cpu-nodes", 2, "simulated CPU-only nodes")
	fs.IntVar(&o.runs, "runs", 3, "runs of each short measurement (the median is printed)")
	fs.StringVar(&o.distro, "distro", "aks", "distribution the sandbox simulates (aks: GPU nodes carry the accelerator label, so gpuctl taint finds them before NFD runs, and no taint yet, unlike GKE's)")
	fs.StringVar(&o.record, "record", "", "also write the figures into this Markdown file (e.g. docs/performance.md), replacing the section of the same size")
	fs.BoolVar(&o.skipInstall, "skip-install", false, "measure taint, detect and template only")
	fs.StringVar(&o.events, "install-events", "", "also write gpuctl install's progress events (JSON lines) to this file, to see where its time went")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b := &bench{o: o, out: stdout, log: stderr}
	if err := b.measure(ctx, stderr); err != nil {
		return err
	}
	if o.record != "" {
		return b.writeRecord(o.record)
	}
	return nil
}

// figure is one measured line.
type figure struct {
	name, value, target string
	// ok: the target is met (nil: no target).
	ok *bool
}

type bench struct {
	o       options
	out     io.Writer
	log     io.Writer
	figures []figure
	bin     string
	c       *sandbox.Cluster
}

func (b *bench) add(name, value, target string, ok *bool) {
	f := figure{name: name, value: value, target: target, ok: ok}
	b.figures = append(b.figures, f)
	fmt.Fprintln(b.out, f.line())
}

func (f figure) line() string {
	mark := " "
	if f.ok != nil {
		mark = map[bool]string{true: "✔", false: "×"}[*f.ok]
	}
	s := fmt.Sprintf("%s %-34s %s", mark, f.name, f.value)
	if f.target != "" {
		s += "   (target " + f.target + ")"
	}
	return s
}

func ptr(b bool) *bool { return &b }

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func (b *bench) measure(ctx context.Context, stderr io.Writer) error {
	b.add("machine", fmt.Sprintf("%d cores, %s/%s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH), "", nil)
	bin, err := buildGpuctl(ctx)
	if err != nil {
		return err
	}
	defer os.RemoveAll(filepath.Dir(bin))
	b.bin = bin

	start := time.Now()
	c, err := sandbox.Start(ctx, sandbox.Options{
		Scenario: sandbox.Scenario{Distro: b.o.distro, GPUNodes: b.o.gpuNodes, CPUNodes: b.o.cpuNodes}, Progress: stderr,
		// A real nfd-worker, device plugin and GFD are processes per node: 500 or 2,000 of each do not
		// fit on the machine, so the benches use the NFD and device-plugin stand-ins and say so.
		NFDStandIn:          true,
		DevicePluginStandIn: true,
	})
	if err != nil {
		return err
	}
	defer c.Stop()
	b.c = c
	b.add("sandbox start", fmt.Sprintf("%s with %d GPU + %d CPU nodes (%s)", secs(time.Since(start)), b.o.gpuNodes, b.o.cpuNodes, b.o.distro), "a few minutes", nil)
	b.add("node feature discovery", "the NFD stand-in (e2e/sandbox/standin/nfd), not NFD "+sandbox.NFDVersion+"'s own worker per node", "", nil)
	b.add("device plugin and GFD", "the device-plugin stand-in (e2e/sandbox/standin/deviceplugin), not NVIDIA's device plugin "+sandbox.DevicePluginVersion+" per node", "", nil)

	gpuNodes, err := b.labelGPUNodes(ctx)
	if err != nil {
		return err
	}
	if err := b.detect(ctx); err != nil {
		return err
	}
	if err := b.taint(ctx, gpuNodes); err != nil {
		return err
	}
	if err := b.template(ctx); err != nil {
		return err
	}
	if b.o.skipInstall {
		return nil
	}
	return b.install(ctx, gpuNodes)
}

func buildGpuctl(ctx context.Context) (string, error) {
	root, err := upstream.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "gpuctl-bench-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "gpuctl")
	// Built as the release is (.goreleaser.yaml): without cgo, the plugin package that kustomize
	// imports is a stub, so the binary is neither dynamically linked nor exports its every symbol,
	// and its mapped text, part of the RSS measured, is what users run.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/gpuctl")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/gpuctl: %v\n%s", err, out)
	}
	return bin, nil
}

// labelGPUNodes labels the simulated GPU nodes for kubectl's selector, before anything is measured.
func (b *bench) labelGPUNodes(ctx context.Context) ([]string, error) {
	var names []string
	for _, n := range b.c.Nodes {
		if n.Hardware.GPUs > 0 {
			names = append(names, n.Node.Name)
		}
	}
	sort.Strings(names)
	raw, err := rawClient(b.c.Config)
	if err != nil {
		return nil, err
	}
	patch := []byte(`{"metadata":{"labels":{"` + benchLabel + `":"true"}}}`)
	err = forEach(ctx, names, 32, func(ctx context.Context, name string) error {
		_, err := raw.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	return names, err
}

// forEach runs f over names with n in flight, returning the first error.
func forEach(ctx context.Context, names []string, n int, f func(context.Context, string) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  atomic.Int64
	)
	for range n {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(names) {
					return
				}
				if err := f(ctx, names[i]); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("%s: %w", names[i], err)
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}

// gpuctl runs the binary and returns its wall time and stderr.
func (b *bench) gpuctl(ctx context.Context, args ...string) (time.Duration, *os.ProcessState, string, error) {
	cmd := exec.CommandContext(ctx, b.bin, append([]string{"--kubeconfig", b.c.Kubeconfig}, args...)...)
	var errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &errOut
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, cmd.ProcessState, errOut.String(), fmt.Errorf("gpuctl %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return d, cmd.ProcessState, errOut.String(), nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// countingTransport counts the requests a client sends.
type countingTransport struct {
	next  http.RoundTripper
	n     atomic.Int64
	mu    sync.Mutex
	paths []string
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	c.mu.Lock()
	c.paths = append(c.paths, r.Method+" "+r.URL.RequestURI())
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

// detect runs gpuctl's detection in-process, counting its API requests.
func (b *bench) detect(ctx context.Context) error {
	var times []time.Duration
	var requests int64
	var paths []string
	for range b.o.runs {
		counter := &countingTransport{}
		flags := genericclioptions.NewConfigFlags(true)
		flags.KubeConfig = &b.c.Kubeconfig
		flags.WrapConfigFn = func(cfg *rest.Config) *rest.Config {
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
			return cfg
		}
		clients, err := kube.NewClients(flags, "")
		if err != nil {
			return err
		}
		start := time.Now()
		if _, err := detect.Run(ctx, detect.From(clients)); err != nil {
			return err
		}
		times = append(times, time.Since(start))
		requests = counter.n.Load()
		paths = counter.paths
	}
	for _, p := range paths {
		fmt.Fprintln(b.log, "detect request:", p)
	}
	d := median(times)
	b.add("detect", fmt.Sprintf("%s, %d API requests", secs(d), requests), "≤ 1 s and ≤ 10 requests at 2,000 nodes", ptr(d <= time.Second && requests <= 10))
	return nil
}

// taint measures gpuctl taint/untaint, kubectl taint -l and a plain concurrent patcher.
func (b *bench) taint(ctx context.Context, nodes []string) error {
	var gT, gU, kT, kU, rT, rU []time.Duration
	kubectl, _ := exec.LookPath("kubectl")
	raw, err := rawClient(b.c.Config)
	if err != nil {
		return err
	}
	// Each run takes the three in turn, in reverse order every other run: the API server's spare capacity
	// drifts (kwok renews every node's lease, 200 a second at 2,000 nodes, and they compete with the
	// patches), and a fixed order would hand the drift to whichever comes first.
	gpuctl := func() error {
		d, _, _, err := b.gpuctl(ctx, "taint")
		if err != nil {
			return err
		}
		gT = append(gT, d)
		if d, _, _, err = b.gpuctl(ctx, "untaint"); err != nil {
			return err
		}
		gU = append(gU, d)
		return nil
	}
	kubectlTaint := func() error {
		if kubectl == "" {
			return nil
		}
		for _, suffix := range []string{"", "-"} {
			start := time.Now()
			cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", b.c.Kubeconfig, "taint", "nodes", "-l", benchLabel+"=true", "nvidia.com/gpu=present:NoSchedule"+suffix)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("kubectl taint: %v\n%s", err, tail(out))
			}
			if suffix == "" {
				kT = append(kT, time.Since(start))
			} else {
				kU = append(kU, time.Since(start))
			}
		}
		return nil
	}
	reference := func() error {
		for _, add := range []bool{true, false} {
			start := time.Now()
			if err := rawTaint(ctx, raw, nodes, add); err != nil {
				return err
			}
			if add {
				rT = append(rT, time.Since(start))
			} else {
				rU = append(rU, time.Since(start))
			}
		}
		return nil
	}
	for i := range b.o.runs {
		order := []func() error{gpuctl, kubectlTaint, reference}
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, m := range order {
			if err := m(); err != nil {
				return err
			}
		}
	}
	n := len(nodes)
	for _, m := range []struct {
		verb           string
		gpuctl, kc, rw []time.Duration
	}{{"taint", gT, kT, rT}, {"untaint", gU, kU, rU}} {
		g, r := median(m.gpuctl), median(m.rw)
		ratio := g.Seconds() / r.Seconds()
		b.add(m.verb+" (API server's limit)", fmt.Sprintf("%s for %d nodes, %.0f patches/s", secs(r), n, float64(n)/r.Seconds()), "", nil)
		lo, hi := math.Inf(1), 0.0
		for i := range m.gpuctl {
			r := m.gpuctl[i].Seconds() / m.rw[i].Seconds()
			lo, hi = min(lo, r), max(hi, r)
		}
		value := fmt.Sprintf("%s, %.2f× the API server's limit (runs %.2f–%.2f×)", secs(g), ratio, lo, hi)
		if len(m.kc) > 0 {
			k := median(m.kc)
			value += fmt.Sprintf("; kubectl %s (gpuctl %.2f× kubectl's time)", secs(k), g.Seconds()/k.Seconds())
		}
		b.add(m.verb+" gpuctl", value, "≤ 1.2× the API server's limit", ptr(ratio <= 1.2))
	}
	return nil
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 && len(s)-i < 2000 {
		return s[max(0, len(s)-2000):]
	}
	return s
}

// rawClient is a client-go client with no client-side rate limit.
func rawClient(cfg *rest.Config) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	return kubernetes.NewForConfig(cfg)
}

// rawTaint adds or removes the GPU taint with unconditional merge patches, 64 in flight: the fastest
// a client can write taints to this API server, as the reference for gpuctl's own figure.
func rawTaint(ctx context.Context, c kubernetes.Interface, nodes []string, add bool) error {
	patch := []byte(`{"spec":{"taints":null}}`)
	if add {
		patch = []byte(`{"spec":{"taints":[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}]}}`)
	}
	return forEach(ctx, nodes, 64, func(ctx context.Context, name string) error {
		_, err := c.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}

func (b *bench) template(ctx context.Context) error {
	var times []time.Duration
	for range b.o.runs {
		d, _, _, err := b.gpuctl(ctx, "template", "--profile", "gke")
		if err != nil {
			return err
		}
		times = append(times, d)
	}
	b.add("template --profile gke", secs(median(times)), "", nil)
	return nil
}

// install runs gpuctl install once and reads the control plane's own timeline from pod conditions.
func (b *bench) install(ctx context.Context, gpuNodes []string) error {
	cmd := exec.CommandContext(ctx, b.bin, "--kubeconfig", b.c.Kubeconfig, "--progress", "json", "install", "--timeout", "60m")
	cmd.Stdout = io.Discard
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	// gpuctl's success also needs nvidia.com/gpu allocatable on every GPU node, which no condition
	// timestamps: watch the nodes for when each first shows it.
	allocCtx, stopAlloc := context.WithCancel(ctx)
	defer stopAlloc()
	allocatable, err := watchAllocatable(allocCtx, b.c.Kube, gpuNodes)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	rss, stopRSS := followRSS(cmd.Process.Pid, 100*time.Millisecond)
	var releaseDone, lastEvent time.Time
	var log strings.Builder
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		var ev event.Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		lastEvent = ev.Time
		if ev.Step == "release-gpu-operator" && ev.Type == event.StepSucceeded {
			releaseDone = ev.Time
		}
	}
	err = cmd.Wait()
	finished := time.Now()
	stopRSS()
	if b.o.events != "" {
		if werr := os.WriteFile(b.o.events, []byte(log.String()), 0o644); werr != nil {
			return werr
		}
	}
	if err != nil {
		return fmt.Errorf("gpuctl install: %v\n%s", err, log.String())
	}
	if lastEvent.IsZero() {
		lastEvent = finished
	}
	wall := finished.Sub(start)
	lastReady, err := lastValidatorReady(ctx, b.c.Kube)
	if err != nil {
		return err
	}
	// gpuctl's success also waits for the ClusterPolicy to say Ready (the operator's own verdict,
	// which it reaches on its next reconcile): the control plane's time ends at the later of the two.
	policyReady, err := clusterPolicyReady(ctx, b.c.Config)
	if err != nil {
		return err
	}
	lastAllocatable := allocatable()
	end := lastReady
	for _, t := range []time.Time{policyReady, lastAllocatable} {
		if t.After(end) {
			end = t
		}
	}
	b.add("install", fmt.Sprintf("%s wall for %d GPU nodes", secs(wall), len(gpuNodes)), "", nil)
	if !releaseDone.IsZero() {
		// Condition times have a resolution of one second.
		cp := end.Sub(releaseDone)
		ours := lastEvent.Sub(releaseDone)
		ratio := ours.Seconds() / max(cp.Seconds(), 1)
		b.add("install: control plane's own time", fmt.Sprintf("%s from the operator release to the last validator Ready (%s), the ClusterPolicy Ready (%s) and the last node's GPUs allocatable (%s)",
			secs(cp), secs(lastReady.Sub(releaseDone)), secs(policyReady.Sub(releaseDone)), secs(lastAllocatable.Sub(releaseDone))), "", nil)
		b.add("install: gpuctl's overhead", fmt.Sprintf("%.3f× (gpuctl %s over the same span)", ratio, secs(ours)), "≤ 1.05×", ptr(ratio <= 1.05))
		delay := lastEvent.Sub(end)
		b.add("install: success after the last Ready", secs(delay)+" (condition times are whole seconds)", "≤ 1 s", ptr(delay <= time.Second+500*time.Millisecond))
	}
	b.add("install: gpuctl peak RSS", fmt.Sprintf("%d MB (VmHWM)", rss.Peak()>>20), "≤ 150 MB at 2,000 nodes", ptr(rss.Peak() > 0 && rss.Peak() <= 150<<20))
	return nil
}

// watchAllocatable watches nodes until ctx ends and returns a function that gives when the last of
// the named nodes first showed nvidia.com/gpu allocatable (zero while one has not).
func watchAllocatable(ctx context.Context, c kubernetes.Interface, names []string) (func() time.Time, error) {
	var (
		mu    sync.Mutex
		first = make(map[string]time.Time, len(names))
	)
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	see := func(obj any) {
		n, ok := obj.(*corev1.Node)
		if !ok || !want[n.Name] {
			return
		}
		if q, ok := n.Status.Allocatable["nvidia.com/gpu"]; !ok || q.IsZero() {
			return
		}
		mu.Lock()
		if _, seen := first[n.Name]; !seen {
			first[n.Name] = time.Now()
		}
		mu.Unlock()
	}
	factory := informers.NewSharedInformerFactory(c, 0)
	inf := factory.Core().V1().Nodes().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, n any) { see(n) }}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, errors.New("watch nodes: cache did not sync")
	}
	go func() { <-ctx.Done(); factory.Shutdown() }()
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		if len(first) < len(want) {
			return time.Time{}
		}
		var last time.Time
		for _, t := range first {
			if t.After(last) {
				last = t
			}
		}
		return last
	}, nil
}

// lastValidatorReady is the latest Ready transition of the nvidia-operator-validator pods.
func lastValidatorReady(ctx context.Context, c kubernetes.Interface) (time.Time, error) {
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "app=nvidia-operator-validator"})
	if err != nil {
		return time.Time{}, err
	}
	var last time.Time
	for _, p := range pods.Items {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && cond.LastTransitionTime.After(last) {
				last = cond.LastTransitionTime.Time
			}
		}
	}
	if last.IsZero() {
		return last, errors.New("no Ready validator pod")
	}
	return last, nil
}

// clusterPolicyReady is when the ClusterPolicy's Ready condition last turned True.
func clusterPolicyReady(ctx context.Context, cfg *rest.Config) (time.Time, error) {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return time.Time{}, err
	}
	list, err := dc.Resource(health.ClusterPolicyResource()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return time.Time{}, err
	}
	var last time.Time
	for _, p := range list.Items {
		conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] != "Ready" || m["status"] != "True" {
				continue
			}
			s, _ := m["lastTransitionTime"].(string)
			if t, err := time.Parse(time.RFC3339, s); err == nil && t.After(last) {
				last = t
			}
		}
	}
	return last, nil
}

// writeRecord puts the figures into a Markdown file as the section for this node count, replacing an
// earlier run of the same size.
func (b *bench) writeRecord(path string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	heading := fmt.Sprintf("## %d GPU nodes", b.o.gpuNodes)
	var sec strings.Builder
	skip := ""
	if b.o.skipInstall {
		skip = " -skip-install"
	}
	fmt.Fprintf(&sec, "%s\n\nRecorded %s with `go run ./e2e/cmd/bench -distro %s -gpu-nodes %d -cpu-nodes %d -runs %d%s`.\n\n```\n",
		heading, time.Now().UTC().Format("2006-01-02"), b.o.distro, b.o.gpuNodes, b.o.cpuNodes, b.o.runs, skip)
	for _, f := range b.figures {
		sec.WriteString(f.line() + "\n")
	}
	sec.WriteString("```\n")
	text := string(old)
	if i := strings.Index(text, heading+"\n"); i >= 0 {
		end := len(text)
		if j := strings.Index(text[i+len(heading):], "\n## "); j >= 0 {
			end = i + len(heading) + j + 1
		}
		text = text[:i] + sec.String() + text[end:]
		if end < len(text) && !strings.HasSuffix(sec.String(), "\n\n") {
			text = strings.Replace(text, sec.String(), sec.String()+"\n", 1)
		}
	} else {
		text = strings.TrimRight(text, "\n") + "\n\n" + sec.String()
	}
	return os.WriteFile(path, []byte(text), 0o644)
}
