package engine

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// TestTemplatePlansAsInstall: with the cluster read, template (and so export and images) plans with
// install's render flags exactly as install does: the same steps, release values and node labels, and
// install's warnings followed by the render's notes.
func TestTemplatePlansAsInstall(t *testing.T) {
	ctx := context.Background()
	det, err := detect.Run(ctx, detect.From(renderCluster()))
	if err != nil {
		t.Fatal(err)
	}
	pool := det.GPUNodes[0].Pool
	for _, tc := range []struct {
		name string
		o    InstallOptions
	}{
		{"--sharing for a pool, --mig, --monitoring, --tolerate-existing-taints, --taint", InstallOptions{
			Sharing: []string{pool + "=time-slicing=4"}, MIG: []string{"mixed", pool + "=all-balanced"}, Monitoring: true, TolerateExistingTaints: true, Taint: true}},
		{"--sharing for every GPU node, --no-taint", InstallOptions{Sharing: []string{"mps=2"}, NoTaint: true}},
		{"--dra", InstallOptions{DRA: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rendered, err := (&Template{Clients: renderCluster(), Namespace: "gpu-operator", Options: tc.o}).Plan(ctx)
			if err != nil {
				t.Fatal(err)
			}
			installed, err := (&Install{Clients: renderCluster()}).buildPlan(ctx, det, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := planSteps(rendered), planSteps(installed); !reflect.DeepEqual(got, want) {
				t.Errorf("template's steps differ from install's:\n%v\n%v", got, want)
			}
			if !slices.Equal(rendered.Warnings[:len(installed.Warnings)], installed.Warnings) {
				t.Errorf("template's warnings %q do not begin with install's %q", rendered.Warnings, installed.Warnings)
			}
		})
	}
}

// renderCluster is checkCluster serving the Prometheus Operator's API and DRA's, for the render flags
// that need them.
func renderCluster() *kube.Clients {
	c := checkCluster(nil)
	disc := c.Discovery.(*fakediscovery.FakeDiscovery)
	disc.Resources = append(disc.Resources,
		&metav1.APIResourceList{GroupVersion: "monitoring.coreos.com/v1", APIResources: []metav1.APIResource{{Name: "servicemonitors", Kind: "ServiceMonitor"}}},
		&metav1.APIResourceList{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "resourceslices", Kind: "ResourceSlice"}}})
	return c
}

// planSteps are a plan's steps as what they do: the kind, the release values, the node labels.
func planSteps(p *plan.Plan) []string {
	var out []string
	for _, s := range p.Steps {
		line := s.ID + " " + string(s.Kind) + " skip=" + s.Skip
		if s.Release != nil {
			line += " values=" + describe(s.Release.Values)
		}
		if s.Labels != nil {
			line += " labels=" + describe(map[string]any{"pools": s.Labels.Pools, "nodes": s.Labels.Nodes})
		}
		out = append(out, line)
	}
	return out
}

// describe is v as JSON, map keys sorted.
func describe(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestTemplateOffline: with --profile (no cluster) every render flag changes the plan as far as it can
// without the cluster's facts, and what it assumed, or could not render, is a warning naming the flag:
// no flag is dropped without a word.
func TestTemplateOffline(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		o     InstallOptions
		layer string // the values layer the flag adds to the operator release
		note  string // what a warning says
	}{
		{"--monitoring renders the gpu-monitoring release, as for a cluster that serves the Prometheus Operator's API",
			InstallOptions{Monitoring: true}, plan.MonitoringSource, "--monitoring: rendered without a cluster, as for one that serves monitoring.coreos.com"},
		{"--dra renders the GPUCluster for the newest Kubernetes the release is tested on",
			InstallOptions{DRA: true}, plan.DRASource, "--dra: rendered without a cluster, for Kubernetes 1.36 (the newest GPU Operator v26.7.0 is tested on)"},
		{"--precompiled auto renders the compiled driver for every node",
			InstallOptions{Precompiled: plan.PrecompiledAuto}, plan.PrecompiledSource, "no GPU node's kernel is known"},
		{"--sharing POOL=MODE=N renders the pool's config and names the label its nodes need",
			InstallOptions{Sharing: []string{"gpu-pool=time-slicing=4"}}, plan.SharingSource, "install labels the GPU nodes of pool gpu-pool nvidia.com/device-plugin.config=time-slicing-4"},
		{"--mig CONFIG renders MIG manager on and names the label every GPU node needs",
			InstallOptions{MIG: []string{"all-1g.10gb"}}, plan.MIGSource, "install labels every GPU node nvidia.com/mig.config=all-1g.10gb (once GPU Feature Discovery"},
		{"--tolerate-existing-taints tolerates no taint, as none is known",
			InstallOptions{TolerateExistingTaints: true}, "", "--tolerate-existing-taints: rendered without a cluster, so no GPU node's taints are known"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Profile = "kubeadm"
			p, err := (&Template{Options: tc.o}).Plan(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tc.layer != "" && !slices.ContainsFunc(p.Step("release-"+plan.OperatorRelease).Release.Layers, func(l plan.Layer) bool { return l.Source == tc.layer }) {
				t.Errorf("the operator release has no %s layer", tc.layer)
			}
			if !slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.Contains(w, tc.note) }) {
				t.Errorf("no warning says %q:\n%s", tc.note, strings.Join(p.Warnings, "\n"))
			}
			if tc.o.Monitoring && p.Step("release-"+plan.MonitoringRelease) == nil {
				t.Error("no gpu-monitoring release")
			}
		})
	}

	t.Run("--dra with --kube-version is judged against it", func(t *testing.T) {
		_, err := (&Template{Options: InstallOptions{Profile: "kubeadm", DRA: true}, KubeVersion: "1.33"}).Plan(ctx)
		if err == nil || !strings.Contains(err.Error(), "1.33") {
			t.Errorf("err = %v, want --dra refused for Kubernetes 1.33", err)
		}
	})

	t.Run("without a render flag no note is added", func(t *testing.T) {
		p, err := (&Template{Options: InstallOptions{Profile: "kubeadm"}}).Plan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Warnings) != 0 {
			t.Errorf("warnings %q", p.Warnings)
		}
	})
}
