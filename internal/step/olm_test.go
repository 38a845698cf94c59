package step

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
)

func TestOLMValuesPinTheOperatorRelease(t *testing.T) {
	entries := func(versions ...string) []any {
		var out []any
		for _, v := range versions {
			out = append(out, map[string]any{"name": "gpu-operator-certified.v" + v, "version": v})
		}
		return out
	}
	pm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "packages.operators.coreos.com/v1", "kind": "PackageManifest",
		"metadata": map[string]any{"name": "gpu-operator-certified", "namespace": "openshift-marketplace"},
		"status": map[string]any{"defaultChannel": "v26.7", "channels": []any{
			map[string]any{"name": "v26.7", "currentCSV": "gpu-operator-certified.v26.7.0", "entries": entries("26.7.0")},
			map[string]any{"name": "v26.3", "currentCSV": "gpu-operator-certified.v26.3.3", "entries": entries("26.3.3", "26.3.2")},
			map[string]any{"name": "stable", "currentCSV": "gpu-operator-certified.v26.7.0", "entries": entries("26.7.0", "26.3.3", "25.10.1")},
		}},
	}}
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), pm)
	x := &executor{clients: &kube.Clients{Dynamic: dyn}, plan: &plan.Plan{}}
	base := map[string]any{"package": "gpu-operator-certified", "source": "certified-operators", "installPlanApproval": "Manual"}
	with := func(kv ...string) map[string]any {
		out := plan.MergeValues(base, nil)
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	t.Run("a release its channel offers is kept as the CSV to start with", func(t *testing.T) {
		for _, in := range []map[string]any{
			with("channel", "v26.3", "startingCSV", "gpu-operator-certified.v26.3.2"),
			with("channel", "stable", "startingCSV", "gpu-operator-certified.v25.10.1"),
		} {
			out, err := x.olmValues(context.Background(), in)
			if err != nil || out["startingCSV"] != in["startingCSV"] || out["channel"] != in["channel"] {
				t.Errorf("%v: %v, %v", in, out, err)
			}
		}
	})
	t.Run("the catalog is read once per subscription", func(t *testing.T) {
		dyn.ClearActions()
		if _, err := x.olmValues(context.Background(), with("channel", "v26.3", "startingCSV", "gpu-operator-certified.v26.3.3")); err != nil {
			t.Fatal(err)
		}
		if n := len(dyn.Actions()); n != 1 {
			t.Errorf("%d API requests, want 1: %v", n, dyn.Actions())
		}
	})
	t.Run("a release the channel does not offer is an input error naming what it offers", func(t *testing.T) {
		_, err := x.olmValues(context.Background(), with("channel", "v26.7", "startingCSV", "gpu-operator-certified.v26.3.3"))
		if !errors.Is(err, plan.ErrInput) || !strings.Contains(err.Error(), "does not offer gpu-operator-certified.v26.3.3 (it offers gpu-operator-certified.v26.7.0)") {
			t.Errorf("err %v", err)
		}
	})
	t.Run("without a release, Manual approval starts at the channel head", func(t *testing.T) {
		out, err := x.olmValues(context.Background(), base)
		if err != nil || out["channel"] != "v26.7" || out["startingCSV"] != "gpu-operator-certified.v26.7.0" {
			t.Errorf("%v, %v", out, err)
		}
	})
}
