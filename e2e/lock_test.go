package e2e

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/lock"
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
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 1}})
	const op = "gpu-operator"
	host, _ := os.Hostname()

	t.Run("two installs started together: one writes, the other exits ExitLocked naming it or finds nothing to do", func(t *testing.T) {
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
	})
	uid := clusterPolicyUID(t, c)

	t.Run("two upgrades started together with --wait-for-lock: one writes, the other waits and finds nothing to change", func(t *testing.T) {
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
	})

	t.Run("a run that finds a live holder changes nothing and names it, even after waiting", func(t *testing.T) {
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
	})

	t.Run("a holder that stopped renewing is taken over once its Lease expired", func(t *testing.T) {
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
		res, _ := installJSON(t, c, "--set", "operator.annotations.team=ml")
		if res.Changed {
			t.Errorf("changed: %+v", res.Steps)
		}
		if got := history(t, c, op); got != "1:superseded 2:deployed" {
			t.Errorf("history %s", got)
		}
		if got := clusterPolicyUID(t, c); got != uid {
			t.Errorf("ClusterPolicy UID %s, was %s", got, uid)
		}
	})

	t.Run("an upgrade an interrupted run left pending is rolled back under the lock, never uninstalled", func(t *testing.T) {
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
		stuck.Labels = map[string]string{release.ManagedByLabel: "true", release.RunLabel: "killed-host.4242.0badc0de", release.RevisionLabel: strconv.Itoa(stuck.Version)}
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
	})
}
