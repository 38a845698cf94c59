package plan

import (
	"reflect"
	"testing"

	"github.com/gpuctl/gpuctl/internal/detect"
)

func TestAddDetectedLayer(t *testing.T) {
	userTols := []any{map[string]any{"key": "mine", "operator": "Exists"}}
	o := Options{
		Files: []Layer{{Source: "mine.yaml", Values: map[string]any{
			"operator":               map[string]any{"tolerations": userTols},
			"node-feature-discovery": map[string]any{"gc": map[string]any{"tolerations": userTols}},
		}}},
		Set: map[string]any{"driver": map[string]any{"enabled": false}},
	}
	allGPU := func(r *detect.Result) { r.Scheduling.OpenWorkers, r.Scheduling.AllWorkersGPU = nil, true }

	t.Run("the safety check's tolerations added at run time give the values the next run's detection gives", func(t *testing.T) {
		first := build(t, detection("kubeadm"), o)
		next := build(t, detection("kubeadm", allGPU), o)
		sf := first.Step("safety").Safety
		if sf.TolerationsPlanned {
			t.Fatal("the first plan should leave the tolerations to the safety check")
		}
		first.Step(sf.OperatorRelease).Release.AddDetectedLayer(Layer{Source: "safety", Values: sf.OperatorValues})
		first.Step(sf.NFDRelease).Release.AddDetectedLayer(Layer{Source: "safety", Values: sf.NFDValues})
		for _, id := range []string{sf.OperatorRelease, sf.NFDRelease} {
			got, want := first.Step(id).Release.Values, next.Step(id).Release.Values
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: first run's values\n%v\nnext run's\n%v", id, got, want)
			}
		}
	})

	t.Run("the layer goes below -f and --set, so the user's values still win", func(t *testing.T) {
		p := build(t, detection("kubeadm"), o)
		sf := p.Step("safety").Safety
		r := p.Step(sf.OperatorRelease).Release
		before := slicesOfSources(r.Layers)
		r.AddDetectedLayer(Layer{Source: "safety", Values: sf.OperatorValues})
		got := slicesOfSources(r.Layers)
		want := append(append(append([]string{}, before[:len(before)-2]...), "safety"), before[len(before)-2:]...)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("layers %v, want %v", got, want)
		}
		if tols := at(r.Values, "operator", "tolerations"); !reflect.DeepEqual(tols, userTols) {
			t.Errorf("operator.tolerations = %v, want the file's %v", tols, userTols)
		}
		if at(r.Values, "driver", "enabled") != false {
			t.Errorf("--set driver.enabled=false lost: %v", r.Values)
		}
	})

	t.Run("without user layers the layer goes last", func(t *testing.T) {
		r := &Release{Layers: []Layer{{Source: "profile x", Values: map[string]any{"a": 1.0}}}}
		r.AddDetectedLayer(Layer{Source: "detected: y", Values: map[string]any{"a": 2.0}})
		if got := slicesOfSources(r.Layers); !reflect.DeepEqual(got, []string{"profile x", "detected: y"}) || r.Values["a"] != 2.0 {
			t.Errorf("layers %v, values %v", got, r.Values)
		}
	})
}

func slicesOfSources(ls []Layer) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Source)
	}
	return out
}
