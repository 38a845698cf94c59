package e2e

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	docschema "github.com/gpuctl/gpuctl/e2e/schema"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/record"
)

// verifyPlanDoc is the part of a VerifyResult document this test reads, by its JSON field names (they
// are the documented interface: docs/schemas/VerifyResult.json).
type verifyPlanDoc struct {
	DryRun bool          `json:"dryRun"`
	Plan   *verifyPlanV1 `json:"plan"`
	Done   *verifyPlanV1 `json:"done"`
}

type verifyPlanV1 struct {
	RunID     string `json:"runID"`
	Namespace string `json:"namespace"`
	Image     string `json:"image"`
	Delete    []struct {
		Namespace string    `json:"namespace"`
		Name      string    `json:"name"`
		UID       types.UID `json:"uid"`
		Why       string    `json:"why"`
	} `json:"delete"`
	Create []struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		Node      string `json:"node"`
		Image     string `json:"image"`
	} `json:"create"`
	DeleteAtEnd []string `json:"deleteAtEnd"`
}

// TestVerifyDryRunIsTheRun leaves a pod of an earlier verify run behind, and checks that
// gpuctl verify --dry-run lists it (with its UID) and the pods it would create, writing nothing, not
// even the lock's Lease; and that the run then deletes and creates exactly what the dry run listed.
// No operator runs: nothing advertises nvidia.com/gpu, so the workloads stay unschedulable and the
// run ends at its --timeout with exit 8; what it deleted and created is the point here.
func TestVerifyDryRunIsTheRun(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1}, NoOperator: true})
	ctx := t.Context()
	const ns = "gpu-operator"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := record.Write(ctx, c.Kube, &record.Record{Command: "install", Namespace: ns}); err != nil {
		t.Fatal(err)
	}
	gpu := simulatedGPUNodes(c)
	for _, n := range gpu {
		patch := []byte(`{"metadata":{"labels":{"` + engine.GPUPresentLabel + `":"true"}}}`)
		if _, err := c.Kube.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The pod a verify run killed with SIGKILL leaves: its labels, nothing else of gpuctl's.
	earlier, err := c.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gpuctl-verify-" + gpu[0] + "-0a0a0a", Labels: map[string]string{
			engine.VerifyNameLabel: engine.VerifyName, "app.kubernetes.io/managed-by": "gpuctl", engine.VerifyRunLabel: "0a0a0a"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vectoradd", Image: engine.DefaultVerifyImage}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	before := writableState(t, c)
	code, stdout, stderr := gpuctl(t, c, "verify", "--dry-run", "-o", "json")
	if code != 0 {
		t.Fatalf("verify --dry-run: exit %d:\n%s", code, stderr)
	}
	if kind, err := docschema.Validate([]byte(stdout)); err != nil || kind != "VerifyResult" {
		t.Errorf("-o json (%s) does not match its schema: %v", kind, err)
	}
	dry := decodeVerifyPlan(t, stdout)
	p := dry.Plan
	if !dry.DryRun || p == nil {
		t.Fatalf("verify --dry-run printed no plan:\n%s", stdout)
	}

	t.Run("the dry run lists the earlier pod by UID and one pod per GPU node", func(t *testing.T) {
		if len(p.Delete) != 1 || p.Delete[0].Name != earlier.Name || p.Delete[0].Namespace != ns || p.Delete[0].UID != earlier.UID || p.Delete[0].Why == "" {
			t.Errorf("plan deletes %+v, want %s/%s (uid %s) with why", p.Delete, ns, earlier.Name, earlier.UID)
		}
		var nodes, names []string
		for _, cr := range p.Create {
			nodes = append(nodes, cr.Node)
			names = append(names, cr.Name)
			if cr.Image != engine.DefaultVerifyImage || cr.Namespace != ns {
				t.Errorf("plan creates %+v, want image %s in %s", cr, engine.DefaultVerifyImage, ns)
			}
		}
		if !slices.Equal(nodes, gpu) {
			t.Errorf("plan creates pods on %v, want %v", nodes, gpu)
		}
		if !slices.Equal(p.DeleteAtEnd, names) {
			t.Errorf("plan deletes %v at the end, want the pods it creates %v", p.DeleteAtEnd, names)
		}
	})

	t.Run("the dry run writes nothing: no pod, no Lease", func(t *testing.T) {
		if got := verifyPodUIDs(t, c); !reflect.DeepEqual(got, map[string]types.UID{earlier.Name: earlier.UID}) {
			t.Errorf("verify pods after the dry run: %v, want only the earlier one", got)
		}
		if _, err := c.Kube.CoordinationV1().Leases(lock.DefaultNamespace).Get(ctx, lock.DefaultName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the dry run wrote the lock's Lease (get: %v)", err)
		}
		assertUnchanged(t, before, writableState(t, c))
	})

	t.Run("the run deletes and creates exactly what the dry run listed", func(t *testing.T) {
		code, stdout, stderr := gpuctl(t, c, "verify", "--timeout", "3s", "-o", "json")
		if code != cli.ExitVerifyFailed {
			t.Fatalf("exit %d, want %d (the workloads cannot schedule here):\n%s", code, cli.ExitVerifyFailed, stderr)
		}
		if kind, err := docschema.Validate([]byte(stdout)); err != nil || kind != "VerifyResult" {
			t.Errorf("-o json (%s) does not match its schema: %v", kind, err)
		}
		run := decodeVerifyPlan(t, stdout)
		if run.DryRun || run.Done == nil {
			t.Fatalf("the run reports nothing done:\n%s", stdout)
		}
		if !reflect.DeepEqual(run.Done.Delete, p.Delete) {
			t.Errorf("the run deleted %+v, the dry run listed %+v", run.Done.Delete, p.Delete)
		}
		if !reflect.DeepEqual(run.Done.Create, p.Create) {
			t.Errorf("the run created %+v, the dry run listed %+v", run.Done.Create, p.Create)
		}
		if !slices.Equal(run.Done.DeleteAtEnd, p.DeleteAtEnd) {
			t.Errorf("the run deleted %v at the end, the dry run listed %v", run.Done.DeleteAtEnd, p.DeleteAtEnd)
		}
		if got := verifyPodUIDs(t, c); len(got) > 0 {
			t.Errorf("verify left pods behind: %v", got)
		}
	})
}

func decodeVerifyPlan(t *testing.T, stdout string) verifyPlanDoc {
	t.Helper()
	var doc verifyPlanDoc
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("verify -o json: %v\n%s", err, stdout)
	}
	return doc
}
