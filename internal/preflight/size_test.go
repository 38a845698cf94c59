package preflight

import (
	"context"
	"strings"
	"testing"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	helmcommon "helm.sh/helm/v4/pkg/release/common"
	helmrelease "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/internal/plan"
)

// EncodedSize must be what Helm's own Secret driver stores, byte for byte.
func TestEncodedSizeIsHelmsStorageSize(t *testing.T) {
	rel := &helmrelease.Release{
		Name: "gpu-operator", Namespace: "gpu-operator", Version: 1,
		Chart:    &chart.Chart{Metadata: &chart.Metadata{Name: "gpu-operator", Version: "1.0.0", APIVersion: "v2"}},
		Config:   map[string]any{"driver": map[string]any{"enabled": false, "version": strings.Repeat("x", 5000)}},
		Manifest: strings.Repeat("kind: ConfigMap\n", 1000),
		Info:     &helmrelease.Info{Status: helmcommon.StatusDeployed},
	}
	want, err := EncodedSize(rel)
	if err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientset()
	if err := driver.NewSecrets(kube.CoreV1().Secrets("gpu-operator")).Create("sh.helm.release.v1.gpu-operator.v1", rel); err != nil {
		t.Fatal(err)
	}
	sec, err := kube.CoreV1().Secrets("gpu-operator").Get(context.Background(), "sh.helm.release.v1.gpu-operator.v1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(sec.Data["release"]); got != want {
		t.Errorf("Helm stored %d bytes, EncodedSize says %d", got, want)
	}
}

func TestReleaseSize(t *testing.T) {
	env := func(sizes ...ReleaseSize) *Env { return &Env{Plan: &plan.Plan{}, ReleaseSizes: sizes} }
	t.Run("releases under the limit pass, with their sizes", func(t *testing.T) {
		r := checkReleaseSize(context.Background(), env(ReleaseSize{"gpu-operator", 300 << 10}, ReleaseSize{"node-feature-discovery", 20 << 10}))
		if r.Status != StatusPass || !strings.Contains(r.Message, "gpu-operator 300 KiB") {
			t.Errorf("%+v", r)
		}
	})
	t.Run("a release over the limit fails with its size and the limit", func(t *testing.T) {
		r := checkReleaseSize(context.Background(), env(ReleaseSize{"gpu-operator", 4_900_000}))
		if r.Status != StatusFail || !strings.Contains(r.Message, "4.7 MiB") || !strings.Contains(r.Message, "1.0 MiB") {
			t.Errorf("%+v", r)
		}
	})
	t.Run("without a plan it is skipped", func(t *testing.T) {
		if r := checkReleaseSize(context.Background(), &Env{}); r.Status != StatusSkip {
			t.Errorf("%+v", r)
		}
	})
	t.Run("its failure is an input failure in the report", func(t *testing.T) {
		rep, err := (&Runner{Checks: []Check{{ID: "release-size", Input: true, Run: checkReleaseSize}}}).Run(context.Background(), env(ReleaseSize{"gpu-operator", 2 << 20}))
		if err != nil || !rep.Failed || len(rep.InputFailed) != 1 {
			t.Errorf("report %+v, err %v", rep, err)
		}
	})
}
