package plan

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/profile"
)

var testCharts = map[string]ChartInfo{
	NFDRelease:      {Name: "node-feature-discovery", Version: "0.19.0", AppVersion: "v0.19.0"},
	OperatorRelease: {Name: "gpu-operator", Version: "26.7.0", AppVersion: "v26.7.0"},
}

// fakeProfiles stands in for the embedded profiles, so these tests pin the planner's behaviour, not
// the profiles' contents (package profile tests those).
func fakeProfiles(name string) (profile.Profile, error) {
	ps := map[string]profile.Profile{
		"kubeadm": {Name: "kubeadm", Values: map[string]any{"driver": map[string]any{"enabled": true}, "toolkit": map[string]any{"enabled": true}},
			NFD: map[string]any{"worker": map[string]any{"config": "x"}}},
		"gke": {Name: "gke", Values: map[string]any{
			"driver":       map[string]any{"enabled": false},
			"hostPaths":    map[string]any{"driverInstallDir": "/home/kubernetes/bin/nvidia"},
			"extraObjects": []any{map[string]any{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": map[string]any{"name": "gpu-operator-quota"}}},
		}, NFD: map[string]any{}},
		"openshift": {Name: "openshift", Values: map[string]any{
			"platform": map[string]any{"openshift": true}, "nfd": map[string]any{"enabled": false},
			"operator": map[string]any{"use_ocp_driver_toolkit": true, "repository": "x"},
			"dcgm":     map[string]any{"enabled": true},
		}, NFD: map[string]any{}},
		"rke2": {Name: "rke2", Values: map[string]any{"toolkit": map[string]any{"env": []any{map[string]any{"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"}}}}, NFD: map[string]any{}},
	}
	p, ok := ps[name]
	if !ok {
		return p, errors.New("no profile " + name)
	}
	return p, nil
}

func detection(distro string, mutate ...func(*detect.Result)) *detect.Result {
	r := &detect.Result{
		Distribution: detect.Candidate{Name: distro, Confidence: 95, Evidence: []detect.Evidence{{Signal: "label", Value: "x=y"}}},
		GPUNodes:     []detect.GPUNode{{Name: "gpu-b"}, {Name: "gpu-a"}},
		Scheduling:   detect.Scheduling{GPUWorkers: []string{"gpu-a", "gpu-b"}, OpenWorkers: []string{"cpu-1"}, OpenNodes: []string{"cpu-1"}},
		// Upstream Kubernetes 1.37, as the sandbox runs it: no ExtendedResourceToleration, MutatingAdmissionPolicy served.
		Admission: detect.Admission{GPUToleration: &detect.Finding{}, MutatingAdmissionPolicy: &detect.Finding{Detected: true}},
	}
	for _, m := range mutate {
		m(r)
	}
	return r
}

func build(t *testing.T, det *detect.Result, o Options) *Plan {
	t.Helper()
	p, err := Build(Input{Detection: det, Profile: fakeProfiles, Charts: testCharts, Options: o})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// operatorLayer is the values layer source adds to the operator release, nil if none.
func operatorLayer(p *Plan, source string) map[string]any {
	for _, l := range p.Step("release-" + OperatorRelease).Release.Layers {
		if l.Source == source {
			return l.Values
		}
	}
	return nil
}

func stepIDs(p *Plan) []string {
	var ids []string
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	return ids
}

func TestBuild(t *testing.T) {
	t.Run("steps come in dependency order: namespace, prerequisites, CRDs, NFD, label wait, safety, operator, toleration, taint, waits", func(t *testing.T) {
		p := build(t, detection("kubeadm"), Options{})
		want := []string{"namespace", "prerequisites", "licensing", "crds", "release-node-feature-discovery", "wait-nfd", "safety",
			"release-gpu-operator", "wait-toleration", "taint", "wait-operator", "wait-validators", "wait-allocatable", "wait-clusterpolicy"}
		if got := stepIDs(p); !reflect.DeepEqual(got, want) {
			t.Errorf("steps %v\nwant  %v", got, want)
		}
		if p.Namespace != "gpu-operator" || p.Timeout.String() != "20m0s" {
			t.Errorf("defaults: namespace %q timeout %s", p.Namespace, p.Timeout)
		}
		if !reflect.DeepEqual(p.GPUNodes, []string{"gpu-a", "gpu-b"}) {
			t.Errorf("GPU nodes %v, want sorted", p.GPUNodes)
		}
	})

	t.Run("the namespace allows privileged pods", func(t *testing.T) {
		ns := build(t, detection("kubeadm"), Options{Namespace: "gpus"}).Step("namespace").Objects[0]
		if at(ns, "metadata", "name") != "gpus" || at(ns, "metadata", "labels").(map[string]any)["pod-security.kubernetes.io/enforce"] != "privileged" {
			t.Errorf("namespace object %v", ns)
		}
	})

	t.Run("values layer chart defaults < profile < detected facts < files < --set", func(t *testing.T) {
		p := build(t, detection("kubeadm", func(r *detect.Result) {
			for i := range r.GPUNodes {
				r.GPUNodes[i].HostDriver = "nvidia.com/gpu.deploy.driver=pre-installed"
			}
		}), Options{
			Files: []Layer{
				{Source: "a.yaml", Values: map[string]any{"driver": map[string]any{"enabled": true, "version": "1"}, "toolkit": map[string]any{"enabled": false}}},
				{Source: "b.yaml", Values: map[string]any{"driver": map[string]any{"version": "2"}}},
			},
			Set: map[string]any{"driver": map[string]any{"version": "3"}},
		})
		r := p.Step("release-gpu-operator").Release
		// The fact (host driver everywhere) beat the profile's driver.enabled=true; a.yaml beat the fact.
		if at(r.Values, "driver", "enabled") != true || at(r.Values, "driver", "version") != "3" || at(r.Values, "toolkit", "enabled") != false {
			t.Errorf("values %v", r.Values)
		}
		var sources []string
		for _, l := range r.Layers {
			sources = append(sources, l.Source)
		}
		if len(sources) != 5 || sources[0] != "profile kubeadm" || !strings.HasPrefix(sources[1], "detected: ") || sources[2] != "file a.yaml" || sources[4] != "--set" {
			t.Errorf("layers %v", sources)
		}
		if facts := r.Layers[1].Values; at(facts, "driver", "enabled") != false {
			t.Errorf("facts layer %v lacks driver.enabled=false", facts)
		}
	})

	t.Run("the node-feature-discovery section of every layer goes to the NFD release only", func(t *testing.T) {
		p := build(t, detection("kubeadm"), Options{Set: map[string]any{"node-feature-discovery": map[string]any{"gc": map[string]any{"enable": false}}}})
		op, nfd := p.Step("release-gpu-operator").Release.Values, p.Step("release-node-feature-discovery").Release.Values
		if _, leaked := op["node-feature-discovery"]; leaked {
			t.Error("the operator release got the NFD section")
		}
		if at(nfd, "gc", "enable") != false || at(nfd, "worker", "config") != "x" {
			t.Errorf("NFD values %v", nfd)
		}
		if at(op, "nfd", "enabled") != false {
			t.Error("the operator chart must not deploy its own NFD: gpuctl installs NFD as a release")
		}
	})

	t.Run("profile objects become prerequisites in the install namespace and leave the chart values", func(t *testing.T) {
		p := build(t, detection("gke"), Options{})
		pre := p.Step("prerequisites")
		if pre.Skip != "" || len(pre.Objects) != 1 || at(pre.Objects[0], "metadata", "namespace") != "gpu-operator" {
			t.Errorf("prerequisites %+v", pre)
		}
		if _, has := p.Step("release-gpu-operator").Release.Values["extraObjects"]; has {
			t.Error("extraObjects left in the chart values: Helm would fight gpuctl over the quota")
		}
		if p.Profile != "gke" || p.ProfileWhy != "detected gke" {
			t.Errorf("profile %s (%s)", p.Profile, p.ProfileWhy)
		}
	})

	t.Run("a distribution without a profile of its own gets kubeadm and says so", func(t *testing.T) {
		p := build(t, detection("nkp"), Options{})
		if p.Profile != "kubeadm" || !strings.Contains(p.ProfileWhy, "no profile for nkp") {
			t.Errorf("profile %s (%s)", p.Profile, p.ProfileWhy)
		}
		if p.Step("prerequisites").Skip == "" {
			t.Error("kubeadm needs no prerequisites, yet the step is not skipped")
		}
	})

	t.Run("an explicit profile wins but a disagreement with detection is a warning", func(t *testing.T) {
		p := build(t, detection("gke"), Options{Profile: "rke2"})
		if p.Profile != "rke2" || len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "looks like gke") {
			t.Errorf("profile %s warnings %v", p.Profile, p.Warnings)
		}
	})

	t.Run("when every worker is a GPU node the operator and NFD master/gc tolerate the taint", func(t *testing.T) {
		p := build(t, detection("kubeadm", func(r *detect.Result) { r.Scheduling.AllWorkersGPU, r.Scheduling.OpenWorkers = true, nil }), Options{})
		op := p.Step("release-gpu-operator").Release.Values
		tols, _ := at(op, "operator", "tolerations").([]any)
		if len(tols) != 2 || at(tols[1].(map[string]any), "key") != "nvidia.com/gpu" {
			t.Errorf("operator tolerations %v", tols)
		}
		nfd := p.Step("release-node-feature-discovery").Release.Values
		if at(nfd, "master", "tolerations") == nil || at(nfd, "gc", "tolerations") == nil {
			t.Errorf("NFD values %v lack master/gc tolerations", nfd)
		}
		if !p.Step("safety").Safety.TolerationsPlanned {
			t.Error("safety step does not know the tolerations are planned")
		}
	})

	t.Run("with schedulable CPU workers nothing tolerates the taint that need not", func(t *testing.T) {
		p := build(t, detection("kubeadm"), Options{})
		if at(p.Step("release-gpu-operator").Release.Values, "operator", "tolerations") != nil {
			t.Error("operator tolerations added although CPU workers remain")
		}
		if s := p.Step("safety").Safety; s.TolerationsPlanned || s.OperatorValues == nil || s.NFDValues == nil {
			t.Errorf("safety %+v: the runtime fallback values must be there", s)
		}
	})

	t.Run("--no-taint skips the safety check and the taint", func(t *testing.T) {
		p := build(t, detection("kubeadm", func(r *detect.Result) { r.Scheduling.AllWorkersGPU = true }), Options{NoTaint: true})
		if p.Step("taint").Skip == "" || p.Step("safety").Skip == "" {
			t.Error("taint or safety not skipped")
		}
		if at(p.Step("release-gpu-operator").Release.Values, "operator", "tolerations") != nil {
			t.Error("tolerations added although nothing is tainted")
		}
	})

	t.Run("an NFD someone else installed is used, not installed again", func(t *testing.T) {
		p := build(t, detection("kubeadm", func(r *detect.Result) {
			r.Existing.NFD = detect.NFDInstall{Present: true, Namespaces: []string{"node-feature-discovery"}}
		}), Options{})
		s := p.Step("release-node-feature-discovery")
		if s.Skip == "" || s.Release != nil || !strings.Contains(s.Skip, "node-feature-discovery") {
			t.Errorf("NFD step %+v", s)
		}
		if got := p.Step("crds").Charts; !reflect.DeepEqual(got, []string{"gpu-operator"}) {
			t.Errorf("CRDs of %v; NFD's CRDs belong to the other install", got)
		}
	})

	t.Run("gpuctl's own NFD release from an earlier run is applied again", func(t *testing.T) {
		p := build(t, detection("kubeadm", func(r *detect.Result) {
			r.Existing.NFD = detect.NFDInstall{Present: true, Helm: &detect.HelmRelease{Name: NFDRelease, Namespace: "gpu-operator", Gpuctl: true}}
		}), Options{})
		if s := p.Step("release-node-feature-discovery"); s.Skip != "" {
			t.Errorf("own NFD skipped: %s", s.Skip)
		}
	})
}

func TestBuildRefuses(t *testing.T) {
	for _, tc := range []struct {
		name        string
		det         *detect.Result
		want        string
		unsupported bool
	}{
		{"GKE Autopilot", detection("gke", func(r *detect.Result) { r.Autopilot = &detect.Finding{Detected: true} }), "Autopilot", true},
		{"a cluster with another tool's GPU operator", detection("kubeadm", func(r *detect.Result) {
			r.Existing.GPUOperator = detect.OperatorInstall{Present: true, Helm: &detect.HelmRelease{Name: "nvidia-gpu-operator", Namespace: "nvidia"}}
		}), "Helm release nvidia/nvidia-gpu-operator", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(Input{Detection: tc.det, Profile: fakeProfiles, Charts: testCharts})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one mentioning %q", err, tc.want)
			}
			if errors.Is(err, ErrUnsupported) != tc.unsupported {
				t.Errorf("errors.Is(err, ErrUnsupported) = %v", !tc.unsupported)
			}
		})
	}
	t.Run("gpuctl's own operator release is upgraded, not refused", func(t *testing.T) {
		det := detection("kubeadm", func(r *detect.Result) {
			r.Existing.GPUOperator = detect.OperatorInstall{Present: true, Helm: &detect.HelmRelease{Name: OperatorRelease, Namespace: "gpu-operator", Gpuctl: true}}
		})
		if _, err := Build(Input{Detection: det, Profile: fakeProfiles, Charts: testCharts}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		name          string
		dst, src, out map[string]any
	}{
		{"maps merge key by key", map[string]any{"a": map[string]any{"x": 1, "y": 2}}, map[string]any{"a": map[string]any{"y": 3}}, map[string]any{"a": map[string]any{"x": 1, "y": 3}}},
		{"lists are replaced, as Helm does", map[string]any{"l": []any{1, 2}}, map[string]any{"l": []any{3}}, map[string]any{"l": []any{3}}},
		{"null deletes a key", map[string]any{"a": 1, "b": 2}, map[string]any{"a": nil}, map[string]any{"b": 2}},
		{"a scalar replaces a map", map[string]any{"a": map[string]any{"x": 1}}, map[string]any{"a": "s"}, map[string]any{"a": "s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := clone(tc.dst)
			if got := merge(tc.dst, tc.src); !reflect.DeepEqual(got, tc.out) {
				t.Errorf("got %v, want %v", got, tc.out)
			}
			if !reflect.DeepEqual(tc.dst, before) {
				t.Error("merge modified its input")
			}
		})
	}
}

func TestLicensing(t *testing.T) {
	nvaie := map[string]any{"driver": map[string]any{
		"repository": "nvcr.io/nvaie", "imagePullSecrets": []any{"ngc-secret"},
		"licensingConfig": map[string]any{"secretName": "licensing-config"},
	}}
	full := Licensing{NLSTokenFile: "/t/token.tok", GriddConfFile: "/t/gridd.conf", NGCAPIKeyEnv: "NGC_API_KEY"}
	t.Run("values that name the NVAIE secrets get both, from the named inputs", func(t *testing.T) {
		p := build(t, detection("kubeadm"), Options{Set: nvaie, Licensing: full})
		s := p.Step("licensing")
		if s.Skip != "" || len(s.Secrets) != 2 {
			t.Fatalf("step %+v", s)
		}
		lic, pull := s.Secrets[0], s.Secrets[1]
		if lic.Name != "licensing-config" || !reflect.DeepEqual(lic.Keys, []string{"client_configuration_token.tok", "gridd.conf"}) || lic.Files[0] != "/t/token.tok" {
			t.Errorf("licensing secret %+v", lic)
		}
		if pull.Name != "ngc-secret" || pull.Type != "kubernetes.io/dockerconfigjson" || pull.Files[0] != "env NGC_API_KEY" || pull.Server != "nvcr.io/nvaie" {
			t.Errorf("pull secret %+v", pull)
		}
	})
	t.Run("a key file wins over the environment, and - means standard input", func(t *testing.T) {
		lic := full
		lic.NGCAPIKeyFile = "-"
		if src := build(t, detection("kubeadm"), Options{Set: nvaie, Licensing: lic}).Step("licensing").Secrets[1].Files[0]; src != "stdin" {
			t.Errorf("source %q", src)
		}
	})
	t.Run("missing inputs stop the plan before anything runs, naming each", func(t *testing.T) {
		_, err := Build(Input{Detection: detection("kubeadm"), Profile: fakeProfiles, Charts: testCharts, Options: Options{Set: nvaie}})
		if !errors.Is(err, ErrMissingLicense) {
			t.Fatalf("err %v", err)
		}
		for _, want := range []string{"--nls-token-file", "--gridd-conf-file", "NGC API key"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not name %s", err, want)
			}
		}
	})
	t.Run("without NVAIE values the step is skipped and needs nothing", func(t *testing.T) {
		if s := build(t, detection("kubeadm"), Options{}).Step("licensing"); s.Skip == "" || len(s.Secrets) != 0 {
			t.Errorf("step %+v", s)
		}
	})
}

func TestBundleLayer(t *testing.T) {
	charts := map[string]ChartInfo{NFDRelease: testCharts[NFDRelease],
		OperatorRelease: {Name: "gpu-operator", Version: "26.3.3", AppVersion: "v26.3.3"}}
	in := Input{Detection: detection("kubeadm"), Profile: fakeProfiles, Charts: charts,
		Bundle: &BundleValues{Version: "v26.3.3", Operator: map[string]any{"driver": map[string]any{"version": "580.126.20", "enabled": false}}}}
	p, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	s := p.Step("release-gpu-operator")
	if s.Release.Layers[0].Source != "operator bundle v26.3.3" || !strings.Contains(s.Title, "v26.3.3") {
		t.Errorf("first layer %q, title %q", s.Release.Layers[0].Source, s.Title)
	}
	// The release's own templates and CRDs: the chart is loaded for v26.3.3, and so are its CRDs.
	if s.Release.AppVersion != "v26.3.3" || p.Step("crds").ChartReleases[OperatorRelease] != "v26.3.3" {
		t.Errorf("release loaded for %q, CRDs for %v", s.Release.AppVersion, p.Step("crds").ChartReleases)
	}
	in.Charts = testCharts
	if _, err := Build(in); err == nil || !strings.Contains(err.Error(), "loaded for v26.7.0") {
		t.Errorf("a chart loaded for another release than the bundle's: err %v", err)
	}
	// The bundle pins images; the profile (driver.enabled=true) still wins over it.
	if at(s.Release.Values, "driver", "version") != "580.126.20" || at(s.Release.Values, "driver", "enabled") != true {
		t.Errorf("values %v", s.Release.Values)
	}
}

func TestGKEDriverInstaller(t *testing.T) {
	charts := map[string]ChartInfo{}
	for k, v := range testCharts {
		charts[k] = v
	}
	charts[GKEDriverInstaller] = ChartInfo{Name: GKEDriverInstaller, Version: "0.1.0"}
	plan := func(nodes ...detect.GPUNode) *Plan {
		t.Helper()
		det := detection("gke", func(r *detect.Result) { r.GPUNodes = nodes })
		p, err := Build(Input{Detection: det, Profile: fakeProfiles, Charts: charts})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("GPU nodes without a GKE-installed driver get Google's installer for their OS", func(t *testing.T) {
		p := plan(detect.GPUNode{Name: "a", OSImage: "Container-Optimized OS from Google"}, detect.GPUNode{Name: "b", OSImage: "Ubuntu 22.04.5 LTS"})
		cos, ubuntu := p.Step("release-gke-driver-installer-cos"), p.Step("release-gke-driver-installer-ubuntu")
		if cos == nil || ubuntu == nil || cos.Release.Values["variant"] != "cos" || ubuntu.Release.Values["variant"] != "ubuntu" {
			t.Fatalf("steps %v", stepIDs(p))
		}
		if ids := stepIDs(p); slices.Index(ids, "release-gke-driver-installer-cos") > slices.Index(ids, "release-gpu-operator") {
			t.Errorf("the installer comes after the operator: %v", ids)
		}
	})
	t.Run("where GKE installs the driver, no installer", func(t *testing.T) {
		p := plan(detect.GPUNode{Name: "a", OSImage: "Container-Optimized OS from Google", HostDriver: "GKE installs the driver"})
		for _, id := range stepIDs(p) {
			if strings.Contains(id, "gke-driver-installer") {
				t.Errorf("unexpected step %s", id)
			}
		}
	})
}

func TestOpenShiftGoesThroughOLM(t *testing.T) {
	charts := map[string]ChartInfo{OLMChart: {Name: OLMChart, Version: "0.1.0"}}
	for k, v := range testCharts {
		charts[k] = v
	}
	det := detection("openshift")
	p, err := Build(Input{Detection: det, Profile: fakeProfiles, Charts: charts, Options: Options{Set: map[string]any{"driver": map[string]any{"version": "595"}}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"namespace", "licensing", "release-nfd-operator", "wait-csv-nfd", "nfd-instance", "wait-nfd", "safety", "taint",
		"release-gpu-operator-certified", "approve", "wait-csv-gpu-operator", "clusterpolicy",
		"wait-operator", "wait-validators", "wait-allocatable", "wait-clusterpolicy"}
	if got := stepIDs(p); !reflect.DeepEqual(got, want) {
		t.Errorf("steps %v\nwant  %v", got, want)
	}
	if p.Namespace != "nvidia-gpu-operator" {
		t.Errorf("namespace %s", p.Namespace)
	}
	if v := p.Step("release-gpu-operator-certified").Release.Values; v["installPlanApproval"] != "Manual" || v["source"] != "certified-operators" ||
		v["channel"] != "v26.7" || v["startingCSV"] != "gpu-operator-certified.v26.7.0" {
		t.Errorf("subscription values %v", v)
	}
	spec := p.Step("clusterpolicy").PolicySpec
	if at(spec, "operator", "use_ocp_driver_toolkit") != true || at(spec, "driver", "version") != "595" || at(spec, "dcgm", "enabled") != true {
		t.Errorf("policy overrides %v", spec)
	}
	for _, chartOnly := range []string{"platform", "nfd"} {
		if _, has := spec[chartOnly]; has {
			t.Errorf("chart-only key %s in the ClusterPolicy overrides", chartOnly)
		}
	}
	if at(spec, "operator", "repository") != nil {
		t.Error("the operator image is OLM's, not the ClusterPolicy's")
	}
	t.Run("the operator release chosen is the CSV subscribed to, in its own channel or the one given", func(t *testing.T) {
		old := map[string]ChartInfo{OLMChart: charts[OLMChart], NFDRelease: charts[NFDRelease],
			OperatorRelease: {Name: "gpu-operator", Version: "25.10.1", AppVersion: "v25.10.1"}}
		for _, tc := range []struct{ channel, want string }{{"", "v25.10"}, {"stable", "stable"}, {"v25.10", "v25.10"}} {
			p, err := Build(Input{Detection: det, Profile: fakeProfiles, Charts: old, Options: Options{Channel: tc.channel}})
			if err != nil {
				t.Fatal(err)
			}
			s := p.Step("release-gpu-operator-certified")
			if v := s.Release.Values; v["channel"] != tc.want || v["startingCSV"] != "gpu-operator-certified.v25.10.1" || !strings.Contains(s.Title, "v25.10.1") {
				t.Errorf("--channel %q: values %v, title %q", tc.channel, v, s.Title)
			}
		}
	})
	t.Run("a release line's channel that cannot offer the release is refused before anything runs", func(t *testing.T) {
		_, err := Build(Input{Detection: det, Profile: fakeProfiles, Charts: charts, Options: Options{Channel: "v26.3"}})
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "--channel v26.3 offers only v26.3.x releases, not operator release v26.7.0") {
			t.Errorf("err %v", err)
		}
	})
	t.Run("NVIDIA's certified operator installed by gpuctl before is no reason to refuse", func(t *testing.T) {
		det := detection("openshift", func(r *detect.Result) {
			r.Existing.GPUOperator = detect.OperatorInstall{Present: true, OLM: &detect.Subscription{Namespace: "nvidia-gpu-operator", Name: "gpu-operator-certified", Package: "gpu-operator-certified",
				HelmRelease: OperatorPackage, HelmNamespace: "nvidia-gpu-operator", Gpuctl: true}}
		})
		if _, err := Build(Input{Detection: det, Profile: fakeProfiles, Charts: charts}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the same Subscription created with oc or the console is someone else's", func(t *testing.T) {
		det := detection("openshift", func(r *detect.Result) {
			r.Existing.GPUOperator = detect.OperatorInstall{Present: true, OLM: &detect.Subscription{Namespace: "nvidia-gpu-operator", Name: "gpu-operator-certified", Package: "gpu-operator-certified"}}
		})
		if _, err := Build(Input{Detection: det, Profile: fakeProfiles, Charts: charts}); err == nil || !strings.Contains(err.Error(), "OLM subscription nvidia-gpu-operator/gpu-operator-certified") {
			t.Errorf("err %v, want the Subscription refused by name", err)
		}
	})
}
