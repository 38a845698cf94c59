package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
)

// runResult is one gpuctl install -o json run.
type runResult struct {
	code           int
	stdout, stderr string
	res            engine.InstallResult
}

// concurrently starts gpuctl install -o json with each argument list at the same moment.
func concurrently(t *testing.T, c *sandbox.Cluster, argss ...[]string) []runResult {
	t.Helper()
	out := make([]runResult, len(argss))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, args := range argss {
		wg.Go(func() {
			<-start
			r := &out[i]
			r.code, r.stdout, r.stderr = gpuctl(t, c, append([]string{"install", "-o", "json"}, args...)...)
			if r.code == 0 {
				if err := json.Unmarshal([]byte(r.stdout), &r.res); err != nil {
					t.Errorf("install -o json: %v\n%s", err, r.stdout)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return out
}

// One writer at a time: gpuctl runs take turns through the Lease kube-system/gpuctl. A run that finds
// it held waits (--wait-for-lock) or exits ExitLocked naming the holder; no run ever uninstalls
// another's release. One sandbox for the whole story.
func TestLockOneWriterAtATime(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 1}})
	const op = "gpu-operator"
	host, _ := os.Hostname()
	var uid types.UID // the ClusterPolicy's, made by the first install

	story(t,
		step{"two installs started together: one writes, the other exits ExitLocked naming it or finds nothing to do", func(t *testing.T) {
			runs := concurrently(t, c, nil, nil)
			var wrote, locked, idle int
			for _, r := range runs {
				switch {
				case r.code == 0 && r.res.Changed:
					wrote++
				case r.code == 0:
					idle++
				case r.code == cli.ExitLocked:
					locked++
					for _, want := range []string{"holds the install lock", host + " pid ", "since ", "--wait-for-lock"} {
						if !strings.Contains(r.stderr, want) {
							t.Errorf("the refused run does not say %q:\n%s", want, r.stderr)
						}
					}
				default:
					t.Errorf("exit %d:\n%s", r.code, r.stderr)
				}
			}
			if wrote != 1 || locked+idle != 1 {
				t.Errorf("%d runs wrote, %d were refused, %d found nothing to do; want exactly one writer", wrote, locked, idle)
			}
			if got := history(t, c, op); got != "1:deployed" {
				t.Errorf("history %s, want one deployed revision", got)
			}
			uid = clusterPolicyUID(t, c)
		}},

		step{"two upgrades started together with --wait-for-lock: one writes, the other waits and finds nothing to change", func(t *testing.T) {
			args := []string{"--set", "operator.annotations.team=ml", "--wait-for-lock", "10m"}
			runs := concurrently(t, c, args, args)
			var wrote, idle int
			for _, r := range runs {
				switch {
				case r.code == 0 && r.res.Changed:
					wrote++
				case r.code == 0:
					idle++
				default:
					t.Errorf("exit %d:\n%s", r.code, r.stderr)
				}
			}
			if wrote != 1 || idle != 1 {
				t.Errorf("%d runs wrote, %d found nothing to do; want one of each", wrote, idle)
			}
			if got := history(t, c, op); got != "1:superseded 2:deployed" {
				t.Errorf("history %s, want revisions 1 and 2, 2 deployed", got)
			}
			if got := clusterPolicyUID(t, c); got != uid {
				t.Errorf("ClusterPolicy UID %s, was %s", got, uid)
			}
		}},

		step{"a run that finds a live holder changes nothing and names it, even after waiting", func(t *testing.T) {
			leases := c.Kube.CoordinationV1().Leases(lock.DefaultNamespace)
			l, err := leases.Get(t.Context(), lock.DefaultName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the Lease gpuctl took: %v", err)
			}
			if l.Spec.HolderIdentity != nil {
				t.Errorf("the Lease is still held by %s after both runs ended", *l.Spec.HolderIdentity)
			}
			// Another person's run, in the middle of its install on another machine.
			id, secs, now := "workstation-7/4242/cafe", int32(30), metav1.NewMicroTime(time.Now())
			l.Spec = coordinationv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now}
			l.Annotations = map[string]string{lock.AnnotationHost: "workstation-7", lock.AnnotationPID: "4242",
				lock.AnnotationCommand: "gpuctl install --profile kubeadm", lock.AnnotationSince: now.UTC().Format(time.RFC3339Nano)}
			if _, err := leases.Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			before := history(t, c, op)
			for _, args := range [][]string{{"install", "--set", "operator.annotations.team=other"}, {"install", "--set", "operator.annotations.team=other", "--wait-for-lock", "3s"}} {
				code, _, stderr := gpuctl(t, c, args...)
				if code != cli.ExitLocked {
					t.Fatalf("exit %d, want %d (locked):\n%s", code, cli.ExitLocked, stderr)
				}
				for _, want := range []string{"workstation-7 pid 4242 (gpuctl install --profile kubeadm) since ", "Nothing was changed"} {
					if !strings.Contains(stderr, want) {
						t.Errorf("stderr lacks %q:\n%s", want, stderr)
					}
				}
			}
			if got := history(t, c, op); got != before {
				t.Errorf("history %s, was %s", got, before)
			}
		}},

		step{"a holder that stopped renewing is taken over once this run saw its Lease unchanged for its duration", func(t *testing.T) {
			// Its RenewTime, written by another host, is a minute old; gpuctl does not compare that
			// host's clock with its own, it waits the lease duration on its own clock and takes the
			// Lease when nothing renewed it meanwhile (internal/lock, as client-go's leader election).
			leases := c.Kube.CoordinationV1().Leases(lock.DefaultNamespace)
			l, err := leases.Get(t.Context(), lock.DefaultName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			old := metav1.NewMicroTime(time.Now().Add(-time.Minute))
			l.Spec.RenewTime = &old
			if _, err := leases.Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			res, _ := installJSON(t, c, "--set", "operator.annotations.team=ml", "--wait-for-lock", "2m")
			if res.Changed {
				t.Errorf("changed: %+v", res.Steps)
			}
			if got := history(t, c, op); got != "1:superseded 2:deployed" {
				t.Errorf("history %s", got)
			}
			if got := clusterPolicyUID(t, c); got != uid {
				t.Errorf("ClusterPolicy UID %s, was %s", got, uid)
			}
		}},

		step{"an upgrade an interrupted run left pending is rolled back under the lock, never uninstalled", func(t *testing.T) {
			// What a gpuctl run killed mid-upgrade leaves: the next revision stored pending-upgrade,
			// labelled with that run, which no longer holds the lock.
			flags := genericclioptions.NewConfigFlags(false)
			flags.KubeConfig = &c.Kubeconfig
			cfg := action.NewConfiguration()
			if err := cfg.Init(flags, "gpu-operator", "secret"); err != nil {
				t.Fatal(err)
			}
			r, err := cfg.Releases.Last(op)
			if err != nil {
				t.Fatal(err)
			}
			last := r.(*releasev1.Release)
			stuck := *last
			info := *last.Info
			info.Status, info.LastDeployed, info.Description = rcommon.StatusPendingUpgrade, time.Now().Add(-time.Minute), "Preparing upgrade"
			stuck.Info, stuck.Version = &info, last.Version+1
			stuck.Labels = map[string]string{detect.ManagedReleaseLabel: "true", release.RunLabel: "killed-host.4242.0badc0de", release.RevisionLabel: strconv.Itoa(stuck.Version)}
			if err := cfg.Releases.Create(&stuck); err != nil {
				t.Fatal(err)
			}
			_, stderr := installJSON(t, c, "--set", "operator.annotations.team=ml")
			if !strings.Contains(stderr, "was left pending-upgrade by an interrupted run; rolled back to revision 2") {
				t.Errorf("stderr does not say what was recovered:\n%s", stderr)
			}
			if got := history(t, c, op); got != "1:superseded 2:superseded 3:failed 4:deployed" {
				t.Errorf("history %s", got)
			}
			if got := clusterPolicyUID(t, c); got != uid {
				t.Errorf("ClusterPolicy UID %s, was %s", got, uid)
			}
		}},
	)
}

// taint, untaint and verify write too (taints, and verify's pods), so they take turns with every other
// gpuctl run through the same Lease: refused with ExitLocked while another run holds it, nothing
// changed; holding it while they run, and freeing it at the end. No operator runs here: verify finds
// the install record and a node labelled a GPU node, and its workload waits on the scheduler (nothing
// advertises nvidia.com/gpu), so it runs until it is interrupted.
func TestLockTaintUntaintVerify(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 1}, NoOperator: true})
	ctx := t.Context()
	gpu := simulatedGPUNodes(c)[0]
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := record.Write(ctx, c.Kube, &record.Record{Command: "install", Namespace: "gpu-operator"}); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"labels":{"` + health.GPUPresentLabel + `":"true"}}}`)
	if _, err := c.Kube.CoreV1().Nodes().Patch(ctx, gpu, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	leases := c.Kube.CoordinationV1().Leases(lock.DefaultNamespace)
	holder := func(t *testing.T) string {
		t.Helper()
		l, err := leases.Get(ctx, lock.DefaultName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}

	t.Run("while another run holds the lock, taint, untaint and verify exit ExitLocked naming it, and change nothing", func(t *testing.T) {
		// Another person's install, on another machine, renewing its Lease as it runs.
		other := lock.Holder{Host: "workstation-7", PID: 4242, Command: "gpuctl install --profile kubeadm", Identity: "workstation-7/4242/cafe"}
		held, err := (&lock.Lock{Client: c.Kube.CoordinationV1(), Holder: &other}).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release(context.WithoutCancel(ctx))
		before := clusterState(t, c)
		for _, args := range [][]string{{"taint"}, {"untaint"}, {"verify"}, {"taint", "--wait-for-lock", "2s"}, {"verify", "--wait-for-lock", "2s"}} {
			code, _, stderr := gpuctl(t, c, args...)
			if code != cli.ExitLocked {
				t.Errorf("%v: exit %d, want %d (locked):\n%s", args, code, cli.ExitLocked, stderr)
			}
			for _, want := range []string{"workstation-7 pid 4242 (gpuctl install --profile kubeadm) since ", "Nothing was changed"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("%v: stderr lacks %q:\n%s", args, want, stderr)
				}
			}
		}
		for _, args := range [][]string{{"taint", "--dry-run"}, {"untaint", "--dry-run"}} {
			if code, _, stderr := gpuctl(t, c, args...); code != 0 {
				t.Errorf("%v takes no lock, yet exit %d:\n%s", args, code, stderr)
			}
		}
		assertUnchanged(t, before, clusterState(t, c))
		assertNoVerifyPods(t, c)
		if got := holder(t); got != other.Identity {
			t.Errorf("the Lease is held by %q, want the other run's", got)
		}
	})
	if got := holder(t); got != "" {
		t.Fatalf("the Lease is still held by %q", got)
	}

	bin, err := gpuctlBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"taint", "untaint"} {
		t.Run(verb+" holds the lock while it runs, and frees it at the end", func(t *testing.T) {
			var pid int
			seen := leaseHistory(t, c, func() {
				cmd := exec.CommandContext(ctx, bin, "--kubeconfig", c.Kubeconfig, verb)
				out, err := cmd.CombinedOutput()
				pid = cmd.Process.Pid
				t.Logf("gpuctl %s (pid %d) → %v\n%s", verb, pid, err, out)
				if err != nil {
					t.Fatalf("gpuctl %s: %v", verb, err)
				}
			})
			held := false
			for _, l := range seen {
				if l.Spec.HolderIdentity != nil && l.Annotations[lock.AnnotationPID] == strconv.Itoa(pid) && strings.Contains(l.Annotations[lock.AnnotationCommand], " "+verb) {
					held = true
				}
			}
			if !held {
				t.Errorf("gpuctl %s (pid %d) never held the Lease: %d states seen", verb, pid, len(seen))
			}
			if len(seen) == 0 || seen[len(seen)-1].Spec.HolderIdentity != nil {
				t.Errorf("gpuctl %s did not free the Lease at the end", verb)
			}
			tainted := slices.ContainsFunc(taintsByNode(t, c)[gpu], func(tn corev1.Taint) bool { return tn.Key == "nvidia.com/gpu" })
			if tainted != (verb == "taint") {
				t.Errorf("after gpuctl %s the GPU node is tainted: %v", verb, tainted)
			}
		})
	}

	t.Run("verify holds the lock while its workload runs: another gpuctl is refused, naming it", func(t *testing.T) {
		var pid int
		code, stderr := runUntil(t, bin, []string{"--kubeconfig", c.Kubeconfig, "verify", "--timeout", "10m"},
			func(ev event.Event) bool {
				return ev.Type == event.StepProgress && ev.Step == "wait" && strings.Contains(ev.Message, "unschedulable")
			},
			func(p int) {
				pid = p
				l, err := leases.Get(ctx, lock.DefaultName, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if l.Spec.HolderIdentity == nil || l.Annotations[lock.AnnotationPID] != strconv.Itoa(pid) || !strings.Contains(l.Annotations[lock.AnnotationCommand], " verify") {
					t.Errorf("while verify (pid %d) runs, the Lease is held by %v (%v)", pid, l.Spec.HolderIdentity, l.Annotations)
				}
				code, _, stderr := gpuctl(t, c, "taint")
				if code != cli.ExitLocked || !strings.Contains(stderr, fmt.Sprintf(" pid %d (", pid)) {
					t.Errorf("taint while verify runs: exit %d, want %d naming pid %d:\n%s", code, cli.ExitLocked, pid, stderr)
				}
			})
		if code != cli.ExitInterrupted {
			t.Errorf("exit %d, want %d:\n%s", code, cli.ExitInterrupted, stderr)
		}
		if got := holder(t); got != "" {
			t.Errorf("the Lease is still held by %q after verify (pid %d) ended", got, pid)
		}
		assertNoVerifyPods(t, c)
	})
}

// leaseHistory runs fn and returns every state gpuctl's Lease went through meanwhile, in order: a
// watch from before fn, read up to the Lease's state after it.
func leaseHistory(t *testing.T, c *sandbox.Cluster, fn func()) []coordinationv1.Lease {
	t.Helper()
	ctx := t.Context()
	leases := c.Kube.CoordinationV1().Leases(lock.DefaultNamespace)
	sel := metav1.ListOptions{FieldSelector: "metadata.name=" + lock.DefaultName}
	list, err := leases.List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	sel.ResourceVersion = list.ResourceVersion
	w, err := leases.Watch(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	fn()
	end, err := leases.Get(ctx, lock.DefaultName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Lease after the run: %v", err)
	}
	if len(list.Items) == 1 && list.Items[0].ResourceVersion == end.ResourceVersion {
		return nil // never written
	}
	var out []coordinationv1.Lease
	for ev := range w.ResultChan() {
		l, ok := ev.Object.(*coordinationv1.Lease)
		if !ok {
			t.Fatalf("watch: %v", ev.Object)
		}
		out = append(out, *l)
		if l.ResourceVersion == end.ResourceVersion {
			return out
		}
	}
	t.Fatalf("the watch ended before it saw the Lease's last state")
	return nil
}
