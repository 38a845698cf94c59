package plan

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/detect"
)

// migPools: two A100 40 GB nodes in pool a100 (GKE's accelerator label), one H100 in pool h100 (GFD's
// product), one L4 in pool l4, one node of an unknown GPU in pool lab.
func migPools(r *detect.Result) {
	r.GPUNodes = []detect.GPUNode{
		{Name: "a-1", Pool: "a100", Product: "nvidia-tesla-a100"}, {Name: "a-2", Pool: "a100", Product: "nvidia-tesla-a100"},
		{Name: "h-1", Pool: "h100", Product: "NVIDIA-H100-80GB-HBM3"},
		{Name: "l-1", Pool: "l4", Product: "nvidia-l4"},
		{Name: "x-1", Pool: "lab"},
	}
}

func TestMIG(t *testing.T) {
	tests := []struct {
		name         string
		distro       string
		mig          []string
		wantStrategy string
		wantNodes    map[string]string
		wantReboot   bool
		wantWarning  string
	}{
		{"mixed, one config on the H100 pool", "kubeadm", []string{"mixed", "h100=all-1g.10gb"}, MIGMixed,
			map[string]string{"h-1": "all-1g.10gb"}, false, ""},
		{"single is the default strategy; GKE reboots to change MIG mode", "gke", []string{"a100=all-1g.5gb"}, MIGSingle,
			map[string]string{"a-1": "all-1g.5gb", "a-2": "all-1g.5gb"}, true, ""},
		{"two pools, each its own config; all-balanced under mixed", "kubeadm", []string{"mixed", "a100=all-balanced", "h100=all-3g.40gb"}, MIGMixed,
			map[string]string{"a-1": "all-balanced", "a-2": "all-balanced", "h-1": "all-3g.40gb"}, false, ""},
		{"all-disabled may go anywhere", "kubeadm", []string{"l4=all-disabled"}, MIGSingle,
			map[string]string{"l-1": "all-disabled"}, false, ""},
		{"a strategy alone labels nothing", "kubeadm", []string{"mixed"}, MIGMixed, nil, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, detection(tt.distro, migPools), Options{MIG: tt.mig})
			layer := operatorLayer(p, MIGSource)
			if at(layer, "mig", "strategy") != tt.wantStrategy || at(layer, "migManager", "enabled") != true {
				t.Errorf("layer %v: want mig.strategy %s and MIG manager on", layer, tt.wantStrategy)
			}
			if got := at(p.Step("release-"+OperatorRelease).Release.Values, "mig", "strategy"); got != tt.wantStrategy {
				t.Errorf("the operator's values have mig.strategy %v", got)
			}
			env, _ := at(layer, "migManager", "env").([]any)
			if reboot := slices.ContainsFunc(env, func(e any) bool {
				m, _ := e.(map[string]any)
				return m["name"] == "WITH_REBOOT" && m["value"] == "true"
			}); reboot != tt.wantReboot {
				t.Errorf("migManager.env %v: WITH_REBOOT %v, want %v", env, reboot, tt.wantReboot)
			}
			s := p.Step(MIGStepID)
			if s == nil || s.Kind != KindNodeLabels || s.Labels == nil || s.Labels.Key != MIGLabel {
				t.Fatalf("step %s = %+v, want labels of %s", MIGStepID, s, MIGLabel)
			}
			if !maps.Equal(s.Labels.Nodes, tt.wantNodes) {
				t.Errorf("labelled %v, want %v", s.Labels.Nodes, tt.wantNodes)
			}
			if ids := stepIDs(p); slices.Index(ids, MIGStepID) < slices.Index(ids, "release-"+OperatorRelease) {
				t.Errorf("steps %v: the labels come before the operator release enables MIG manager", ids)
			}
			warned := false
			for _, w := range p.Warnings {
				warned = warned || (tt.wantWarning != "" && strings.Contains(w, tt.wantWarning))
			}
			if warned != (tt.wantWarning != "") {
				t.Errorf("warnings %v, want one naming %q", p.Warnings, tt.wantWarning)
			}
		})
	}
}

func TestMIGNoneTakesGpuctlsLabelsOff(t *testing.T) {
	p := build(t, detection("kubeadm", migPools), Options{MIG: []string{"none"}})
	if operatorLayer(p, MIGSource) != nil {
		t.Error("--mig none adds a values layer")
	}
	if s := p.Step(MIGStepID); s == nil || len(s.Labels.Nodes) != 0 {
		t.Errorf("step %+v, want one that labels nothing (and takes gpuctl's labels off)", s)
	}
}

func TestMIGRefusals(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"MIG on the L4 pool", Options{MIG: []string{"l4=all-1g.10gb"}}, "nvidia-l4 GPUs, which have no MIG"},
		{"one config for every GPU node, the L4 among them", Options{MIG: []string{"all-1g.10gb"}}, "node l-1"},
		{"a profile the A100 40 GB does not offer", Options{MIG: []string{"a100=all-3g.40gb"}}, "no MIG profile 3g.40gb; theirs are 1g.5gb"},
		{"an unknown pool", Options{MIG: []string{"b200=all-1g.23gb"}}, `no GPU node pool "b200"`},
		{"all-balanced needs mixed", Options{MIG: []string{"h100=all-balanced"}}, "add --mig mixed"},
		{"two strategies", Options{MIG: []string{"single", "mixed"}}, "one mig.strategy"},
		{"a pool twice", Options{MIG: []string{"h100=all-1g.10gb", "h100=all-2g.20gb"}}, "has a config already"},
		{"none with more", Options{MIG: []string{"none", "mixed"}}, "give it alone"},
		{"not a config name", Options{MIG: []string{"h100=All 1g"}}, "want single or mixed"},
		{"mig.strategy from --set too", Options{MIG: []string{"mixed"}, Set: map[string]any{"mig": map[string]any{"strategy": "single"}}}, "--set sets mig.strategy too"},
		{"with --dra", Options{MIG: []string{"mixed"}, DRA: true}, "DRA stack"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			det := detection("kubeadm", migPools, withKubernetes("v1.37.0"))
			_, err := Build(Input{Detection: det, Profile: fakeProfiles, Charts: testCharts, Options: tt.opts})
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v, want one line of ErrInput naming %q", err, tt.want)
			}
		})
	}
}

func TestMIGOf(t *testing.T) {
	tests := []struct {
		node     detect.GPUNode
		capable  bool
		known    bool
		profiles []string
	}{
		{detect.GPUNode{Product: "NVIDIA-A100-SXM4-40GB"}, true, true, migA100x40},
		{detect.GPUNode{Product: "nvidia-a100-80gb"}, true, true, migX80},
		{detect.GPUNode{Product: "NVIDIA-H100-80GB-HBM3"}, true, true, migX80},
		{detect.GPUNode{Product: "NVIDIA-H100-NVL"}, true, true, migH100x94},
		{detect.GPUNode{Product: "nvidia-h200-141gb"}, true, true, migH200},
		{detect.GPUNode{Product: "NVIDIA-A30"}, true, true, migA30},
		{detect.GPUNode{Product: "b200"}, true, true, nil},
		{detect.GPUNode{Product: "a100"}, true, true, nil},
		{detect.GPUNode{Product: "Tesla-T4"}, false, true, nil},
		{detect.GPUNode{Product: "NVIDIA-L40S"}, false, true, nil},
		{detect.GPUNode{Product: "a10g"}, false, true, nil},
		{detect.GPUNode{InstanceType: "p4d.24xlarge"}, true, true, nil},
		{detect.GPUNode{InstanceType: "a3-highgpu-8g"}, true, true, nil},
		{detect.GPUNode{InstanceType: "g5.xlarge"}, false, true, nil},
		{detect.GPUNode{InstanceType: "Standard_NC4as_T4_v3"}, false, true, nil},
		{detect.GPUNode{InstanceType: "bare-metal-1"}, false, false, nil},
		{detect.GPUNode{}, false, false, nil},
	}
	for _, tt := range tests {
		p, ok := migOf(tt.node)
		if ok != tt.known || p.capable != tt.capable || strings.Join(p.profiles, ",") != strings.Join(tt.profiles, ",") {
			t.Errorf("migOf(%+v) = %+v, %v; want capable %v, known %v, profiles %v", tt.node, p, ok, tt.capable, tt.known, tt.profiles)
		}
	}
}

// unknownGPUs: the GPU nodes of a fresh on-premises cluster before GPU feature discovery ran: NFD's
// PCI label only, no product, no instance type.
func unknownGPUs(r *detect.Result) {
	r.GPUNodes = []detect.GPUNode{{Name: "k-1", Pool: "worker-gpu"}, {Name: "k-2", Pool: "worker-gpu"}}
}

// noGPUNodesYet: a fresh cluster whose GPU nodes detection cannot see before NFD runs.
func noGPUNodesYet(r *detect.Result) { r.GPUNodes = nil }

func TestMIGDecidedAfterGFD(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(*detect.Result)
		mig       []string
		wantKind  Kind
		wantNodes map[string]string
		wantEvery string
		wantWarn  string
	}{
		{"GPU models known: decided now", migPools, []string{"mixed", "h100=all-1g.10gb"}, KindNodeLabels, map[string]string{"h-1": "all-1g.10gb"}, "", ""},
		{"a pool of GPUs gpuctl cannot judge: decided after GPU feature discovery", migPools, []string{"lab=all-1g.10gb"}, KindMIGAfterGFD,
			map[string]string{"x-1": "all-1g.10gb"}, "", "will decide after GPU Feature Discovery"},
		{"no GPU node known before NFD: a config for every GPU node waits for GPU feature discovery", noGPUNodesYet, []string{"mixed", "all-1g.5gb"}, KindMIGAfterGFD,
			nil, "all-1g.5gb", "will decide after GPU Feature Discovery"},
		{"no GPU node known before NFD: a strategy alone waits for GPU feature discovery too", noGPUNodesYet, []string{"mixed"}, KindMIGAfterGFD,
			nil, "", "will decide after GPU Feature Discovery"},
		{"GPU nodes without a model: a strategy alone waits for GPU feature discovery", unknownGPUs, []string{"mixed"}, KindMIGAfterGFD,
			nil, "", "will decide after GPU Feature Discovery"},
		{"all-disabled needs no decision", unknownGPUs, []string{"all-disabled"}, KindNodeLabels, map[string]string{"k-1": "all-disabled", "k-2": "all-disabled"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, detection("kubeadm", tt.mutate), Options{MIG: tt.mig})
			s := p.Step(MIGStepID)
			if s == nil || s.Kind != tt.wantKind || s.Labels == nil {
				t.Fatalf("step %s = %+v, want kind %s", MIGStepID, s, tt.wantKind)
			}
			if !maps.Equal(s.Labels.Nodes, tt.wantNodes) || s.Labels.Pools[MIGEveryGPUNode] != tt.wantEvery {
				t.Errorf("labels %+v, want nodes %v and every GPU node %q", s.Labels, tt.wantNodes, tt.wantEvery)
			}
			if tt.wantKind == KindMIGAfterGFD && !strings.Contains(s.Why, "GPU Feature Discovery") {
				t.Errorf("the step does not say it decides after GPU Feature Discovery: %q", s.Why)
			}
			warned := slices.ContainsFunc(p.Warnings, func(w string) bool { return tt.wantWarn != "" && strings.Contains(w, tt.wantWarn) })
			if warned != (tt.wantWarn != "") {
				t.Errorf("warnings %v, want one saying %q", p.Warnings, tt.wantWarn)
			}
		})
	}
}

func TestMIGStrategyOnGPUsWithoutMIGIsRefused(t *testing.T) {
	onlyL4 := func(r *detect.Result) {
		r.GPUNodes = []detect.GPUNode{{Name: "l-1", Pool: "l4", Product: "nvidia-l4"}, {Name: "t-1", Pool: "t4", Product: "Tesla-T4"}}
	}
	_, err := Build(Input{Detection: detection("kubeadm", onlyL4), Profile: fakeProfiles, Charts: testCharts, Options: Options{MIG: []string{"mixed"}}})
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "l-1 (nvidia-l4)") || !strings.Contains(err.Error(), "t-1 (Tesla-T4)") {
		t.Errorf("err = %v, want ErrInput naming each node and its GPU", err)
	}
}

func TestDecideMIG(t *testing.T) {
	t4 := func(name string) GFDNode { return GFDNode{Name: name, Product: "Tesla-T4", MIGCapable: false} }
	a100 := func(name string) GFDNode {
		return GFDNode{Name: name, Product: "NVIDIA-A100-SXM4-40GB", MIGCapable: true}
	}
	every := func(config string) *NodeLabels {
		return &NodeLabels{Key: MIGLabel, Pools: map[string]string{MIGEveryGPUNode: config}}
	}
	tests := []struct {
		name     string
		labels   *NodeLabels
		nodes    []GFDNode
		want     map[string]string
		wantWarn string
		wantErr  string
	}{
		{"a strategy alone on T4s is refused, naming the nodes and their model", &NodeLabels{Key: MIGLabel}, []GFDNode{t4("k-1"), t4("k-2")}, nil, "",
			"k-1 (Tesla-T4), k-2 (Tesla-T4)"},
		{"a strategy alone with one MIG-capable GPU passes and labels nothing", &NodeLabels{Key: MIGLabel}, []GFDNode{t4("k-1"), a100("k-2")}, map[string]string{}, "", ""},
		{"a config for every GPU node on T4s is refused", every("all-1g.5gb"), []GFDNode{t4("k-1")}, nil, "", "k-1 (Tesla-T4)"},
		{"a config for every GPU node labels the MIG-capable ones and names the others", every("all-1g.5gb"), []GFDNode{t4("k-1"), a100("k-2")},
			map[string]string{"k-2": "all-1g.5gb"}, "k-1 (Tesla-T4)", ""},
		{"a profile the GPU does not offer counts as no MIG", every("all-3g.40gb"), []GFDNode{a100("k-1")}, nil, "", "no MIG profile 3g.40gb"},
		{"planned nodes of an unknown pool: kept where GFD says MIG", &NodeLabels{Key: MIGLabel, Nodes: map[string]string{"x-1": "all-1g.5gb", "x-2": "all-1g.5gb"}},
			[]GFDNode{a100("x-1"), t4("x-2")}, map[string]string{"x-1": "all-1g.5gb"}, "x-2 (Tesla-T4)", ""},
		{"all-disabled goes anywhere", every("all-disabled"), []GFDNode{t4("k-1")}, map[string]string{"k-1": "all-disabled"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, warnings, err := DecideMIG(tt.labels, tt.nodes)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("err = %v, want one line of ErrInput naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("labels %v, want %v", got, tt.want)
			}
			warned := slices.ContainsFunc(warnings, func(w string) bool { return tt.wantWarn != "" && strings.Contains(w, tt.wantWarn) })
			if warned != (tt.wantWarn != "") {
				t.Errorf("warnings %v, want one naming %q", warnings, tt.wantWarn)
			}
		})
	}
}

func TestMIGRepartition(t *testing.T) {
	node := func(name, config string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if config != "" {
			n.Labels = map[string]string{MIGLabel: config}
		}
		return n
	}
	l := &NodeLabels{Key: MIGLabel, Nodes: map[string]string{"a-2": "all-3g.20gb", "a-1": "all-3g.20gb", "a-3": "all-3g.20gb"}}
	got := MIGRepartition(l, []corev1.Node{node("a-1", "all-1g.5gb"), node("a-2", "all-3g.20gb"), node("a-3", ""), node("l-1", "all-1g.5gb")})
	if !slices.Equal(got, []string{"a-1", "a-3"}) {
		t.Errorf("MIGRepartition = %v, want the planned nodes whose label changes: [a-1 a-3]", got)
	}
	if got := MIGRepartition(nil, []corev1.Node{node("a-1", "x")}); got != nil {
		t.Errorf("no labels step: %v", got)
	}
}
