package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
)

// TestInstallRecreatesWhatWasDeleted: someone deletes the ClusterPolicy of a gpuctl install (kubectl
// delete clusterpolicy). The release's chart and values are unchanged, but it is not: the dry run lists
// an upgrade of the gpu-operator release that recreates the ClusterPolicy, the run does exactly that
// (a new Helm revision, as helm upgrade recreates what it cannot find), the real operator reconciles
// it again, and a second run changes nothing.
func TestInstallRecreatesWhatWasDeleted(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 1}})
	installJSON(t, c)
	before := len(releaseHistory(t, c, "gpu-operator"))

	policies := dynamicClient(t, c).Resource(clusterPolicies)
	if err := policies.Delete(t.Context(), "cluster-policy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 2*time.Minute, "the ClusterPolicy is gone", func(ctx context.Context) (bool, error) {
		_, err := policies.Get(ctx, "cluster-policy", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})

	code, stdout, stderr := gpuctl(t, c, "install", "--dry-run", "-o", "json")
	if code != 0 {
		t.Fatalf("install --dry-run exited %d:\n%s", code, stderr)
	}
	var doc struct {
		Writes struct {
			Objects  []writtenObject `json:"objects"`
			Releases []struct {
				Name      string   `json:"name"`
				Operation string   `json:"operation"`
				Recreate  []string `json:"recreate"`
			} `json:"releases"`
		} `json:"writes"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("install --dry-run -o json: %v\n%s", err, stdout)
	}
	for _, r := range doc.Writes.Releases {
		want, wantRecreate := "unchanged", []string(nil)
		if r.Name == "gpu-operator" {
			want, wantRecreate = "upgrade", []string{"ClusterPolicy cluster-policy"}
		}
		if r.Operation != want || !slices.Equal(r.Recreate, wantRecreate) {
			t.Errorf("the dry run lists release %s: %s recreating %v, want %s recreating %v", r.Name, r.Operation, r.Recreate, want, wantRecreate)
		}
	}
	if !slices.ContainsFunc(doc.Writes.Objects, func(o writtenObject) bool {
		return o.Kind == "ClusterPolicy" && o.Name == "cluster-policy" && o.Action == "create"
	}) {
		t.Errorf("the dry run does not list the ClusterPolicy's creation: %+v", doc.Writes.Objects)
	}

	installJSON(t, c, "--timeout", "5m")
	if got := len(releaseHistory(t, c, "gpu-operator")); got != before+1 {
		t.Errorf("gpu-operator has %d revisions after the repair, want %d (one upgrade)", got, before+1)
	}
	assertReconciled(t, c, "cluster-policy")
	assertRerunChangesNothing(t, c, nil)
}
