package podrun

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/gpuctl/gpuctl/e2e/sandbox/controlplane"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// Spec says which pods a Supervisor runs and how.
type Spec struct {
	// Name prefixes the Supervisor's log lines ("nfd").
	Name string
	// Select reports whether the Supervisor runs pod p (bound, Running, not being deleted: the
	// Supervisor checks that first); a pod it does not run with a non-empty why is logged once.
	Select func(p *corev1.Pod) (run bool, why string)
	// Start starts p's program.
	Start func(ctx context.Context, p *corev1.Pod) (*controlplane.Process, error)
	// Logf writes a line to the sandbox's log.
	Logf func(format string, args ...any)
}

// Supervisor keeps one process running per selected pod (see the package doc).
type Supervisor struct {
	spec    Spec
	trigger chan struct{}
	pods    corelisters.PodLister

	mu      sync.Mutex
	procs   map[types.UID]*process
	ignored map[types.UID]bool // pods not run, logged once
	stopped bool
}

// process is the program run for one pod.
type process struct {
	pod       *corev1.Pod
	proc      *controlplane.Process
	crashes   int
	notBefore time.Time
}

// Run starts a Supervisor on factory's pod informer (the caller starts the factory); it runs until
// ctx is done, counted in wg. Stop its processes with Stop after that. synced are further informers
// to wait for before the first start.
func Run(ctx context.Context, factory informers.SharedInformerFactory, spec Spec, wg *sync.WaitGroup, synced ...cache.InformerSynced) *Supervisor {
	s := &Supervisor{
		spec:    spec,
		trigger: make(chan struct{}, 1),
		pods:    factory.Core().V1().Pods().Lister(),
		procs:   map[types.UID]*process{},
		ignored: map[types.UID]bool{},
	}
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(standin.OnAnyChange(func(any) { s.Poke() }))
	synced = append(synced, factory.Core().V1().Pods().Informer().HasSynced)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if !cache.WaitForCacheSync(ctx.Done(), synced...) {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.trigger:
				s.reconcile(ctx)
			}
		}
	}()
	return s
}

// Poke makes the Supervisor compare the pods with its processes soon.
func (s *Supervisor) Poke() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// wanted are the pods the Supervisor runs now.
func (s *Supervisor) wanted() map[types.UID]*corev1.Pod {
	pods, err := s.pods.List(labels.Everything())
	if err != nil {
		return nil
	}
	want := map[types.UID]*corev1.Pod{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
			continue
		}
		run, why := s.spec.Select(p)
		if run {
			want[p.UID] = p
			continue
		}
		s.mu.Lock()
		if why != "" && !s.ignored[p.UID] {
			s.ignored[p.UID] = true
			s.spec.Logf("%s: not running pod %s/%s: %s", s.spec.Name, p.Namespace, p.Name, why)
		}
		s.mu.Unlock()
	}
	return want
}

func (s *Supervisor) reconcile(ctx context.Context) {
	want := s.wanted()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	for uid, pr := range s.procs {
		if want[uid] == nil {
			s.spec.Logf("%s: stopping the process of pod %s/%s", s.spec.Name, pr.pod.Namespace, pr.pod.Name)
			s.stopLocked(pr)
			delete(s.procs, uid)
		}
	}
	for uid, p := range want {
		pr := s.procs[uid]
		if pr != nil && pr.proc != nil && pr.proc.Running() {
			continue
		}
		if pr != nil && time.Now().Before(pr.notBefore) {
			time.AfterFunc(time.Until(pr.notBefore), s.Poke)
			continue
		}
		proc, err := s.spec.Start(ctx, p)
		if err != nil {
			s.spec.Logf("%s: pod %s/%s: %v", s.spec.Name, p.Namespace, p.Name, err)
			time.AfterFunc(10*time.Second, s.Poke)
			continue
		}
		if pr == nil {
			pr = &process{}
			s.procs[uid] = pr
		}
		pr.pod, pr.proc = p, proc
		go s.watchExit(pr, proc)
	}
}

// stopLocked stops pr's process; its exit is no crash (watchExit).
func (s *Supervisor) stopLocked(pr *process) {
	if pr.proc == nil {
		return
	}
	pr.proc.Stop(10 * time.Second)
	pr.proc = nil
}

// watchExit sets a kubelet-like back-off when a program exits without the Supervisor stopping it.
func (s *Supervisor) watchExit(pr *process, proc *controlplane.Process) {
	started := time.Now()
	<-proc.Exited()
	s.mu.Lock()
	defer s.mu.Unlock()
	if pr.proc != proc || s.stopped {
		return
	}
	if time.Since(started) > 10*time.Minute {
		pr.crashes = 0
	}
	backoff := min(10*time.Second<<pr.crashes, 5*time.Minute)
	pr.crashes++
	pr.notBefore = time.Now().Add(backoff)
	s.spec.Logf("%s: the process of pod %s/%s exited (%v); restarting in %s", s.spec.Name, pr.pod.Namespace, pr.pod.Name, proc.Err(), backoff)
	time.AfterFunc(backoff, s.Poke)
}

// Restart stops the processes of the pods match selects and starts them again at once, as a
// program restarts when it is told its world changed (a signal, its pod recreated).
func (s *Supervisor) Restart(why string, match func(p *corev1.Pod) bool) {
	s.mu.Lock()
	for _, pr := range s.procs {
		if pr.proc != nil && match(pr.pod) {
			s.spec.Logf("%s: restarting the process of pod %s/%s: %s", s.spec.Name, pr.pod.Namespace, pr.pod.Name, why)
			s.stopLocked(pr)
			pr.notBefore = time.Time{}
		}
	}
	s.mu.Unlock()
	s.Poke()
}

// Stop stops every process and waits for them.
func (s *Supervisor) Stop() {
	s.mu.Lock()
	s.stopped = true
	procs := s.procs
	s.procs = map[types.UID]*process{}
	s.mu.Unlock()
	for _, pr := range procs {
		if pr.proc != nil {
			pr.proc.Stop(10 * time.Second)
		}
	}
}

// PIDs are the running processes' IDs.
func (s *Supervisor) PIDs() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pids []int
	for _, pr := range s.procs {
		if pr.proc != nil && pr.proc.Running() {
			pids = append(pids, pr.proc.Pid())
		}
	}
	return pids
}
