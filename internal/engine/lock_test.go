package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/taint"
)

var leaseGVR = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

// otherRunsLease is the Lease of another person's run, renewed a moment ago on another machine.
func otherRunsLease() *coordinationv1.Lease {
	id, secs, now := "workstation-7/4242/cafe", int32(30), metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: lock.DefaultName, Namespace: lock.DefaultNamespace, Annotations: map[string]string{
			lock.AnnotationHost: "workstation-7", lock.AnnotationPID: "4242", lock.AnnotationCommand: "gpuctl install"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}
}

// leaseHolder is the Lease's holderIdentity as the fake cluster stores it ("" when free or absent).
func leaseHolder(t *testing.T, cs *fake.Clientset) string {
	t.Helper()
	o, err := cs.Tracker().Get(leaseGVR, lock.DefaultNamespace, lock.DefaultName)
	if err != nil {
		return ""
	}
	if l := o.(*coordinationv1.Lease); l.Spec.HolderIdentity != nil {
		return *l.Spec.HolderIdentity
	}
	return ""
}

// Every verb that writes takes gpuctl's install lock: refused while another run holds it (nothing
// written), holding it whenever it writes, and freeing it at the end. Dry runs take none.
func TestWritingVerbsTakeTheLock(t *testing.T) {
	tainted := gpuNode("gpu-1", map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true"})
	tainted.Spec.Taints = []corev1.Taint{taint.GPUTaint}
	tainted.Annotations = map[string]string{taint.AddedTaintsAnnotation: `[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}]`}
	for _, tc := range []struct {
		verb string
		// cluster has something for the verb to change; write is the call that changes it.
		cluster         func(t *testing.T) *fake.Clientset
		write, resource string
		run             func(ctx context.Context, c *kube.Clients, dryRun bool) error
		dryRun          bool
	}{
		{
			verb:    "taint",
			cluster: func(*testing.T) *fake.Clientset { return checkCluster(nil).Kube.(*fake.Clientset) },
			write:   "patch", resource: "nodes", dryRun: true,
			run: func(ctx context.Context, c *kube.Clients, dryRun bool) error {
				_, err := (&TaintNodes{Clients: c, DryRun: dryRun}).Run(ctx)
				return err
			},
		},
		{
			verb:    "untaint",
			cluster: func(*testing.T) *fake.Clientset { return fake.NewClientset(tainted.DeepCopy()) },
			write:   "patch", resource: "nodes", dryRun: true,
			run: func(ctx context.Context, c *kube.Clients, dryRun bool) error {
				_, err := (&UntaintNodes{Clients: c, DryRun: dryRun}).Run(ctx)
				return err
			},
		},
		{
			verb: "verify",
			cluster: func(t *testing.T) *fake.Clientset {
				return verifyCluster(t, map[string]kubelet{"gpu-1": succeeds}, gpuNode("gpu-1", nil))
			},
			write: "create", resource: "pods",
			run: func(ctx context.Context, c *kube.Clients, _ bool) error {
				_, err := (&Verify{Clients: c}).Run(ctx)
				return err
			},
		},
	} {
		clients := func(cs *fake.Clientset) *kube.Clients {
			return &kube.Clients{Kube: cs, Discovery: cs.Discovery(), Namespace: "gpu-operator"}
		}
		t.Run(tc.verb+" is refused, naming the holder, while another run holds the lock", func(t *testing.T) {
			cs := tc.cluster(t)
			if err := cs.Tracker().Add(otherRunsLease()); err != nil {
				t.Fatal(err)
			}
			err := tc.run(t.Context(), clients(cs), false)
			var held *lock.HeldError
			if !errors.Is(err, lock.ErrLocked) || !errors.As(err, &held) || held.Holder.Host != "workstation-7" || held.Holder.PID != 4242 {
				t.Fatalf("err = %v, want the lock held by workstation-7 pid 4242", err)
			}
			for _, a := range cs.Actions() {
				if a.GetVerb() == tc.write && a.GetResource().Resource == tc.resource {
					t.Errorf("a refused run wrote: %s %s", a.GetVerb(), a.GetResource().Resource)
				}
			}
			if got := leaseHolder(t, cs); got != "workstation-7/4242/cafe" {
				t.Errorf("the Lease is held by %q after the refused run", got)
			}
		})
		t.Run(tc.verb+" holds the lock whenever it writes, and frees it at the end", func(t *testing.T) {
			cs := tc.cluster(t)
			var mu sync.Mutex
			var holders []string
			cs.PrependReactor(tc.write, tc.resource, func(k8stesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				holders = append(holders, leaseHolder(t, cs))
				mu.Unlock()
				return false, nil, nil
			})
			if err := tc.run(t.Context(), clients(cs), false); err != nil {
				t.Fatal(err)
			}
			if len(holders) == 0 {
				t.Fatalf("%s wrote nothing", tc.verb)
			}
			for _, h := range holders {
				if h == "" {
					t.Errorf("%s wrote without holding the lock", tc.verb)
				}
			}
			if got := leaseHolder(t, cs); got != "" {
				t.Errorf("the Lease is still held by %q after the run", got)
			}
		})
		if tc.dryRun {
			t.Run(tc.verb+" --dry-run takes no lock", func(t *testing.T) {
				cs := tc.cluster(t)
				if err := cs.Tracker().Add(otherRunsLease()); err != nil {
					t.Fatal(err)
				}
				if err := tc.run(t.Context(), clients(cs), true); err != nil {
					t.Fatalf("a dry run with the lock held elsewhere: %v", err)
				}
				for _, a := range cs.Actions() {
					if a.GetResource() == leaseGVR && a.GetVerb() != "get" {
						t.Errorf("a dry run wrote the Lease: %s", a.GetVerb())
					}
				}
			})
		}
	}
}

// A mistake in the inputs is refused before the lock's Lease is written, as before any other write:
// every input is judged without the cluster first.
func TestInputsAreJudgedBeforeTheLock(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("driver: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, c *kube.Clients) error
	}{
		{"install with a values file that does not parse", func(ctx context.Context, c *kube.Clients) error {
			_, err := (&Install{Clients: c, Options: InstallOptions{ValuesFiles: []string{bad}}}).Run(ctx)
			return err
		}},
		{"install with an unknown operator release", func(ctx context.Context, c *kube.Clients) error {
			_, err := (&Install{Clients: c, Options: InstallOptions{OperatorVersion: "v1.0.0"}}).Run(ctx)
			return err
		}},
		{"install with --set that does not parse", func(ctx context.Context, c *kube.Clients) error {
			_, err := (&Install{Clients: c, Options: InstallOptions{Set: []string{"driver.enabled"}}}).Run(ctx)
			return err
		}},
		{"install with values too large for any Helm release", func(ctx context.Context, c *kube.Clients) error {
			_, err := (&Install{Clients: c, Options: InstallOptions{Set: []string{"driver.annotations.blob=" + incompressible(2<<20)}}}).Run(ctx)
			return err
		}},
		{"upgrade with a values file that does not parse", func(ctx context.Context, c *kube.Clients) error {
			_, err := (&Upgrade{Clients: c, Options: UpgradeOptions{ValuesFiles: []string{bad}}}).Run(ctx)
			return err
		}},
		{"upgrade to an unknown operator release", func(ctx context.Context, c *kube.Clients) error {
			_, err := (&Upgrade{Clients: c, Options: UpgradeOptions{OperatorVersion: "v1.0.0"}}).Run(ctx)
			return err
		}},
		{"verify with a --nodes selector that does not parse", func(ctx context.Context, c *kube.Clients) error {
			_, err := (&Verify{Clients: c, Options: VerifyOptions{Nodes: "pool in (a"}}).Run(ctx)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := checkCluster(nil)
			cs := c.Kube.(*fake.Clientset)
			err := tc.run(t.Context(), c)
			if !errors.Is(err, plan.ErrInput) {
				t.Fatalf("err = %v, want an input mistake", err)
			}
			for _, a := range cs.Actions() {
				if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
					t.Errorf("wrote before judging the inputs: %s %s", a.GetVerb(), a.GetResource().Resource)
				}
				if a.GetResource() == leaseGVR {
					t.Errorf("went for the lock before judging the inputs: %s", a.GetVerb())
				}
			}
		})
	}
}

// incompressible is n characters that gzip does not shrink much (a xorshift sequence of
// letters): values of that size cannot fit any Helm release.
func incompressible(n int) string {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = 'a' + byte(x%26)
	}
	return string(b)
}
