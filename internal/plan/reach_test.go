package plan

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/internal/detect"
)

func TestUntolerated(t *testing.T) {
	dedicated := corev1.Taint{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}
	nodes := []detect.GPUNode{
		{Name: "gpu-a", Taints: []corev1.Taint{
			{Key: TaintKey, Value: TaintValue, Effect: corev1.TaintEffectNoSchedule},
			{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule},
			{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoExecute},
		}},
		{Name: "gpu-b", Taints: []corev1.Taint{dedicated, {Key: "evict", Effect: corev1.TaintEffectNoExecute}}},
	}
	t.Run("the chart defaults tolerate the GPU taint and the DaemonSet controller's own, nothing else that repels", func(t *testing.T) {
		got := Untolerated(nodes, OperandTolerations(nil))
		want := []NodeTaint{{Node: "gpu-b", Taint: dedicated}, {Node: "gpu-b", Taint: corev1.Taint{Key: "evict", Effect: corev1.TaintEffectNoExecute}}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Untolerated = %v, want %v", got, want)
		}
	})
	t.Run("a values list replaces the default", func(t *testing.T) {
		values := map[string]any{"daemonsets": map[string]any{"tolerations": []any{map[string]any{"operator": "Exists"}}}}
		if got := Untolerated(nodes, OperandTolerations(values)); len(got) != 0 {
			t.Errorf("Untolerated = %v with a tolerate-everything list", got)
		}
	})
}

func TestTolerateExistingTaints(t *testing.T) {
	dedicated := corev1.Taint{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}
	tainted := func(r *detect.Result) { r.GPUNodes[0].Taints = []corev1.Taint{dedicated} }
	file := Layer{Source: "mine.yaml", Values: map[string]any{"driver": map[string]any{"enabled": true}}}

	t.Run("the flag adds a layer above the detected facts and below -f with exactly the untolerated taints", func(t *testing.T) {
		p := build(t, detection("kubeadm", tainted), Options{TolerateExistingTaints: true, Files: []Layer{file}})
		want := map[string]any{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
		for _, c := range []struct {
			release string
			path    []string
			def     []any
		}{
			{"release-gpu-operator", []string{"daemonsets", "tolerations"}, defaultOperandTolerations()},
			{"release-node-feature-discovery", []string{"worker", "tolerations"}, defaultNFDWorkerTolerations()},
		} {
			r := p.Step(c.release).Release
			i := slices.IndexFunc(r.Layers, func(l Layer) bool { return strings.HasPrefix(l.Source, "--tolerate-existing-taints: ") })
			if i < 1 || !strings.Contains(r.Layers[i].Source, "gpu-b dedicated=ml:NoSchedule") || userLayer(r.Layers[i-1]) ||
				slices.ContainsFunc(r.Layers[i+1:], func(l Layer) bool { return !userLayer(l) }) {
				t.Errorf("%s layers %v", c.release, slicesOfSources(r.Layers))
			}
			if c.release == "release-gpu-operator" && r.Layers[len(r.Layers)-1].Source != "file mine.yaml" {
				t.Errorf("%s layers %v, want the file last", c.release, slicesOfSources(r.Layers))
			}
			got, _ := at(r.Values, c.path...).([]any)
			if wantList := append(normalized(map[string]any{"l": c.def})["l"].([]any), want); !reflect.DeepEqual(got, wantList) {
				t.Errorf("%s %s = %v, want %v", c.release, strings.Join(c.path, "."), got, wantList)
			}
		}
	})

	t.Run("on OpenShift the ClusterPolicy's operands get the tolerations, below -f", func(t *testing.T) {
		p := build(t, detection("openshift", tainted), Options{TolerateExistingTaints: true})
		got, _ := at(p.Step("clusterpolicy").PolicySpec, "daemonsets", "tolerations").([]any)
		want := append(normalized(map[string]any{"l": defaultOperandTolerations()})["l"].([]any),
			map[string]any{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"})
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ClusterPolicy daemonsets.tolerations = %v, want %v", got, want)
		}
		mine := []any{map[string]any{"operator": "Exists"}}
		p = build(t, detection("openshift", tainted), Options{TolerateExistingTaints: true,
			Files: []Layer{{Source: "mine.yaml", Values: map[string]any{"daemonsets": map[string]any{"tolerations": mine}}}}})
		if got := at(p.Step("clusterpolicy").PolicySpec, "daemonsets", "tolerations"); !reflect.DeepEqual(got, mine) {
			t.Errorf("with -f: %v, want the file's %v", got, mine)
		}
		if got := at(build(t, detection("openshift", tainted), Options{}).Step("clusterpolicy").PolicySpec, "daemonsets", "tolerations"); got != nil {
			t.Errorf("without the flag: %v", got)
		}
	})

	t.Run("without the flag, or with nothing untolerated, there is no such layer", func(t *testing.T) {
		for _, p := range []*Plan{
			build(t, detection("kubeadm", tainted), Options{}),
			build(t, detection("kubeadm"), Options{TolerateExistingTaints: true}),
		} {
			for _, id := range []string{"release-gpu-operator", "release-node-feature-discovery"} {
				for _, l := range p.Step(id).Release.Layers {
					if strings.HasPrefix(l.Source, "--tolerate-existing-taints") {
						t.Errorf("%s has layer %q", id, l.Source)
					}
				}
			}
		}
	})
}

func TestDefaultTolerationsAreTheCharts(t *testing.T) {
	for _, c := range []struct {
		file string
		path []string
		want []any
	}{
		{"../../charts/gpu-operator/values.yaml", []string{"daemonsets", "tolerations"}, defaultOperandTolerations()},
		{"../../charts/node-feature-discovery/values.yaml", []string{"worker", "tolerations"}, defaultNFDWorkerTolerations()},
	} {
		b, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if got := at(v, c.path...); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %s = %v, plan assumes %v", c.file, strings.Join(c.path, "."), got, c.want)
		}
	}
}
