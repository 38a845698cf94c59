package plan

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/detect"
)

func TestDecideTaint(t *testing.T) {
	found := func(b bool) *detect.Finding { return &detect.Finding{Detected: b} }
	admission := func(plugin, policy *detect.Finding) func(*detect.Result) {
		return func(r *detect.Result) {
			r.Admission = detect.Admission{GPUToleration: plugin, MutatingAdmissionPolicy: policy}
		}
	}
	allGPU := func(r *detect.Result) {
		r.Scheduling.AllSchedulableGPU, r.Scheduling.OpenNodes, r.Scheduling.OpenWorkers = true, nil, nil
	}
	workloads := func(ws ...detect.GPUNodeWorkload) func(*detect.Result) {
		return func(r *detect.Result) { r.GPUNodeWorkloads = ws }
	}
	tests := []struct {
		name         string
		det          *detect.Result
		o            TaintOptions
		wantTaint    bool
		wantTol      string
		wantPolicy   bool
		wantSkip     string // a part of the reason
		wantStranded []string
	}{
		{
			name: "GKE: the API server adds the toleration, there are CPU nodes: taint", wantTaint: true, wantTol: TolerationPlugin,
			det: detection("gke", admission(found(true), found(true))), o: TaintOptions{PolicyAvailable: true},
		},
		{
			name: "kubeadm 1.37 with a CPU worker: gpuctl's policy adds the toleration, then the taint", wantTaint: true, wantTol: TolerationPolicy, wantPolicy: true,
			det: detection("kubeadm", admission(found(false), found(true))), o: TaintOptions{PolicyAvailable: true},
		},
		{
			name: "kubeadm 1.35 with a CPU worker: neither plugin nor policy, so no taint, and the toleration pods would need is named",
			det:  detection("kubeadm", admission(found(false), found(false))), o: TaintOptions{PolicyAvailable: true},
			wantSkip: "{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}",
		},
		{
			name: "a refused dry run: not known, so the policy does the plugin's job", wantTaint: true, wantTol: TolerationPolicy, wantPolicy: true,
			det: detection("kubeadm", admission(nil, found(true))), o: TaintOptions{PolicyAvailable: true},
		},
		{
			name: "OpenShift without the plugin: OLM installs the operator, gpuctl has no chart for a policy: no taint",
			det:  detection("openshift", admission(found(false), found(true))), o: TaintOptions{},
			wantSkip: "cannot install a MutatingAdmissionPolicy",
		},
		{
			name: "every schedulable node is a GPU node (a single-node k3s box): no taint, as GKE does",
			det:  detection("k3s", admission(found(false), found(true)), allGPU), o: TaintOptions{PolicyAvailable: true},
			wantSkip: "every schedulable node is a GPU node",
		},
		{
			name: "every schedulable node is a GPU node even with the plugin on", det: detection("eks", admission(found(true), found(false)), allGPU),
			o: TaintOptions{PolicyAvailable: true}, wantSkip: "every schedulable node is a GPU node",
		},
		{
			name: "--taint taints a cluster of GPU nodes only, with the policy for GPU pods", wantTaint: true, wantTol: TolerationPolicy, wantPolicy: true,
			det: detection("k3s", admission(found(false), found(true)), allGPU), o: TaintOptions{Force: true, PolicyAvailable: true},
		},
		{
			name: "--taint where nothing adds the toleration: GPU workloads are stranded", wantTaint: true,
			det: detection("kubeadm", admission(found(false), found(false)), workloads(detect.GPUNodeWorkload{Kind: "Deployment", Namespace: "ml", Name: "train", RequestsGPU: true})),
			o:   TaintOptions{Force: true, PolicyAvailable: true}, wantStranded: []string{"Deployment ml/train"},
		},
		{
			name: "--no-taint wins over everything", det: detection("gke", admission(found(true), found(true))),
			o: TaintOptions{NoTaint: true, PolicyAvailable: true}, wantSkip: "--no-taint",
		},
		{
			name: "what the taint does to what runs today", wantTaint: true, wantTol: TolerationPolicy, wantPolicy: true,
			det: detection("kubeadm", admission(found(false), found(true)), workloads(
				detect.GPUNodeWorkload{Kind: "Deployment", Namespace: "ml", Name: "train", RequestsGPU: true},
				detect.GPUNodeWorkload{Kind: "Deployment", Namespace: "web", Name: "shop", OtherNodes: true},
				detect.GPUNodeWorkload{Kind: "Deployment", Namespace: "web", Name: "pinned"},
				detect.GPUNodeWorkload{Kind: "DaemonSet", Namespace: "logging", Name: "fluent-bit", OtherNodes: true},
				detect.GPUNodeWorkload{Kind: "Pod", Namespace: "ml", Name: "notebook", RequestsGPU: true, PendingPods: 1},
				detect.GPUNodeWorkload{Kind: "Deployment", Namespace: "gpu-operator", Name: "gpu-operator"},
			)),
			o:            TaintOptions{PolicyAvailable: true, Own: []string{"gpu-operator"}},
			wantStranded: []string{"Deployment web/pinned", "Pod ml/notebook"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideTaint(tc.det, tc.o)
			if d.Taint != tc.wantTaint || d.Toleration != tc.wantTol || d.Policy != tc.wantPolicy {
				t.Errorf("taint=%v toleration=%q policy=%v (skip %q), want %v %q %v", d.Taint, d.Toleration, d.Policy, d.Skip, tc.wantTaint, tc.wantTol, tc.wantPolicy)
			}
			if tc.wantSkip != "" && !strings.Contains(d.Skip, tc.wantSkip) {
				t.Errorf("skip %q, want it to say %q", d.Skip, tc.wantSkip)
			}
			if !tc.wantTaint && !strings.Contains(d.Skip, "--") {
				t.Errorf("skip %q names no flag", d.Skip)
			}
			var stranded []string
			for _, w := range d.Stranded {
				stranded = append(stranded, w.String())
			}
			if !reflect.DeepEqual(stranded, tc.wantStranded) {
				t.Errorf("stranded %v, want %v (workloads %+v)", stranded, tc.wantStranded, d.Workloads)
			}
			for _, w := range d.Workloads {
				if w.Namespace == "gpu-operator" {
					t.Errorf("gpuctl's own namespace is listed: %+v", w)
				}
				if w.Effect == "" {
					t.Errorf("%s has no effect", w)
				}
			}
		})
	}
}

func TestBuildTaint(t *testing.T) {
	noAdmission := func(r *detect.Result) {
		r.Admission = detect.Admission{GPUToleration: &detect.Finding{}, MutatingAdmissionPolicy: &detect.Finding{}}
	}
	allGPU := func(r *detect.Result) {
		r.Scheduling = detect.Scheduling{ControlPlaneNodes: []string{"cp"}, GPUWorkers: []string{"gpu-a", "gpu-b"}, AllWorkersGPU: true, AllSchedulableGPU: true}
	}

	t.Run("gpuctl's policy is a detected fact of the operator release, and the taint waits for it", func(t *testing.T) {
		p := build(t, detection("kubeadm"), Options{})
		r := p.Step("release-gpu-operator").Release
		if at(r.Values, PolicyValue, "enabled") != true {
			t.Errorf("values %v lack %s.enabled=true", r.Values, PolicyValue)
		}
		if facts := r.Layers[1]; !strings.HasPrefix(facts.Source, "detected: ") || at(facts.Values, PolicyValue, "enabled") != true {
			t.Errorf("facts layer %+v", facts)
		}
		if w, tn := p.Step("wait-toleration"), p.Step("taint"); w.Skip != "" || tn.Skip != "" || tn.Taint.Toleration != TolerationPolicy {
			t.Errorf("wait-toleration %+v, taint %+v", w, tn)
		}
	})

	t.Run("with ExtendedResourceToleration on, no policy and no wait", func(t *testing.T) {
		p := build(t, detection("gke", func(r *detect.Result) { r.Admission.GPUToleration = &detect.Finding{Detected: true} }), Options{})
		if v := at(p.Step("release-gpu-operator").Release.Values, PolicyValue); v != nil {
			t.Errorf("policy values %v", v)
		}
		if p.Step("wait-toleration").Skip == "" || p.Step("taint").Skip != "" {
			t.Error("the wait should be skipped and the taint not")
		}
	})

	t.Run("kubeadm with GPU workers only: no taint, no tolerations, no policy, and the plan says why", func(t *testing.T) {
		p := build(t, detection("kubeadm", allGPU), Options{})
		tn := p.Step("taint")
		if !strings.Contains(tn.Skip, "every schedulable node is a GPU node") || !strings.Contains(tn.Skip, "--taint") || p.Step("safety").Skip == "" {
			t.Errorf("taint skip %q, safety skip %q", tn.Skip, p.Step("safety").Skip)
		}
		op := p.Step("release-gpu-operator").Release.Values
		if at(op, "operator", "tolerations") != nil || at(op, PolicyValue) != nil {
			t.Errorf("operator values %v", op)
		}
	})

	t.Run("--taint taints them anyway, and the operator and NFD master/gc tolerate it", func(t *testing.T) {
		p := build(t, detection("kubeadm", allGPU), Options{Taint: true})
		tn := p.Step("taint")
		if tn.Skip != "" || !tn.Taint.Forced || !strings.Contains(tn.Why, "--taint") {
			t.Errorf("taint %+v", tn)
		}
		if at(p.Step("release-gpu-operator").Release.Values, "operator", "tolerations") == nil || !p.Step("safety").Safety.TolerationsPlanned {
			t.Error("the operator does not tolerate the taint")
		}
	})

	t.Run("GPU nodes tainted before keep the operator's tolerations where every worker is a GPU node", func(t *testing.T) {
		p := build(t, detection("kubeadm", allGPU, func(r *detect.Result) { r.GPUNodes[0].Tainted = true }), Options{})
		if at(p.Step("release-gpu-operator").Release.Values, "operator", "tolerations") == nil {
			t.Error("the operator would not tolerate the taint the GPU nodes already carry")
		}
	})

	t.Run("neither plugin nor policy: no taint by default", func(t *testing.T) {
		p := build(t, detection("kubeadm", noAdmission), Options{})
		if s := p.Step("taint").Skip; !strings.Contains(s, "does not add the GPU toleration") {
			t.Errorf("taint skip %q", s)
		}
	})

	t.Run("--taint with --no-taint is an input mistake", func(t *testing.T) {
		_, err := Build(Input{Detection: detection("kubeadm"), Profile: fakeProfiles, Charts: testCharts, Options: Options{Taint: true, NoTaint: true}})
		if !errors.Is(err, ErrInput) {
			t.Errorf("err = %v, want ErrInput", err)
		}
	})
}

func TestTaintStepNamesTheWorkloads(t *testing.T) {
	p := build(t, detection("kubeadm", func(r *detect.Result) {
		r.GPUNodeWorkloads = []detect.GPUNodeWorkload{{Kind: "Deployment", Namespace: "web", Name: "shop", OtherNodes: true}}
	}), Options{})
	if why := p.Step("taint").Why; !strings.Contains(why, "Deployment web/shop: its new pods go to nodes without GPUs") {
		t.Errorf("taint step's why %q does not name the workload", why)
	}
}

// gpuctl taint asks DecideTaint with Force, as install's --taint: what install would not do by default
// is its Default (without install's flag), and only a policy already in force counts (NoPolicy says so).
func TestDecideTaintDefault(t *testing.T) {
	off := &detect.Finding{}
	served := &detect.Finding{Detected: true}
	tests := []struct {
		name        string
		det         *detect.Result
		o           TaintOptions
		wantDefault string // a part of it; "" for none
	}{
		{"where install would taint there is no default to override", detection("gke", func(r *detect.Result) {
			r.Admission = detect.Admission{GPUToleration: served}
		}), TaintOptions{Force: true}, ""},
		{"every schedulable node a GPU node", detection("k3s", func(r *detect.Result) {
			r.Admission = detect.Admission{GPUToleration: served}
			r.Scheduling.AllSchedulableGPU = true
		}), TaintOptions{Force: true}, "every schedulable node is a GPU node"},
		{"nothing adds the toleration: the policy is not in force", detection("kubeadm", func(r *detect.Result) {
			r.Admission = detect.Admission{GPUToleration: off, MutatingAdmissionPolicy: served}
		}), TaintOptions{Force: true, NoPolicy: "gpuctl's MutatingAdmissionPolicy is not in force"}, "and gpuctl's MutatingAdmissionPolicy is not in force: GPU pods would need {key: nvidia.com/gpu"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideTaint(tc.det, tc.o)
			if !d.Taint || d.Skip != "" {
				t.Fatalf("forced: taint %v, skip %q", d.Taint, d.Skip)
			}
			if (tc.wantDefault == "") != (d.Default == "") || !strings.Contains(d.Default, tc.wantDefault) {
				t.Errorf("default %q, want it to say %q", d.Default, tc.wantDefault)
			}
			if strings.Contains(d.Default, "--taint") {
				t.Errorf("default %q names install's flag", d.Default)
			}
			o := tc.o
			o.Force = false
			if u := DecideTaint(tc.det, o); d.Default != "" && u.Skip != d.Default+"; --taint taints them anyway" {
				t.Errorf("unforced skip %q, forced default %q: not the same reason", u.Skip, d.Default)
			}
		})
	}
}
