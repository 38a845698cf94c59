package wizard

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/profile"
)

// The sharing, MIG and allocation answers become the same options the flags would give, so the
// review (engine.Check, the install's own plan) refuses what the flags would be refused.
func TestGPUModeChoicesBecomeTheFlagsOptions(t *testing.T) {
	tests := []struct {
		name        string
		base        engine.InstallOptions
		c           choices
		wantSharing []string
		wantDRA     bool
		wantSet     []string
	}{
		{"time-slicing for every node, a pool's own choice from the flags kept",
			engine.InstallOptions{Sharing: []string{"gpu-pool=mps=2"}}, choices{Sharing: "time-slicing=4", GPUs: gpusDevicePlugin, MIG: chartMIGStrategy},
			[]string{"time-slicing=4", "gpu-pool=mps=2"}, false, nil},
		{"sharing off for every node drops the flags' cluster-wide choice only",
			engine.InstallOptions{Sharing: []string{"mps=2", "l4=time-slicing=2"}}, choices{GPUs: gpusDevicePlugin, MIG: chartMIGStrategy},
			[]string{"l4=time-slicing=2"}, false, nil},
		{"DRA", engine.InstallOptions{}, choices{GPUs: gpusDRA, MIG: chartMIGStrategy}, nil, true, nil},
		{"the MIG strategy as --set when the flags chose no --mig", engine.InstallOptions{}, choices{GPUs: gpusDevicePlugin, MIG: "mixed"},
			nil, false, []string{"mig.strategy=mixed"}},
		{"--mig from the flags decides the strategy", engine.InstallOptions{MIG: []string{"mixed", "gpu-pool=all-1g.10gb"}}, choices{GPUs: gpusDevicePlugin, MIG: "single"},
			nil, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options(tt.base, "gke", nil, tt.c)
			if !slices.Equal(o.Sharing, tt.wantSharing) || o.DRA != tt.wantDRA || !slices.Equal(o.Set, tt.wantSet) {
				t.Errorf("options: sharing %v, dra %v, set %v; want %v, %v, %v", o.Sharing, o.DRA, o.Set, tt.wantSharing, tt.wantDRA, tt.wantSet)
			}
			if !slices.Equal(o.MIG, tt.base.MIG) {
				t.Errorf("--mig %v, want the flags' %v", o.MIG, tt.base.MIG)
			}
		})
	}
}

func TestInitialGPUModeChoicesFollowTheFlags(t *testing.T) {
	c := initialChoices(engine.InstallOptions{Sharing: []string{"l4=mps=2", "time-slicing=4"}, DRA: true}, "gke", false, nil)
	if c.Sharing != "time-slicing=4" || c.GPUs != gpusDRA {
		t.Errorf("initial choices %+v, want the flags' time-slicing=4 and DRA", c)
	}
	if c := initialChoices(engine.InstallOptions{}, "gke", false, nil); c.Sharing != "" || c.GPUs != gpusDevicePlugin {
		t.Errorf("initial choices %+v, want no sharing and the device plugin", c)
	}
}

func TestConfigFileKeepsTheGPUModes(t *testing.T) {
	b, err := ConfigFile(engine.InstallOptions{Sharing: []string{"time-slicing=4"}, MIG: []string{"mixed", "gpu-pool=all-1g.10gb"}, DRA: true, Monitoring: true}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sharing:\n- time-slicing=4", "mig:\n- mixed\n- gpu-pool=all-1g.10gb", "dra: true", "monitoring: true"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the config file lacks %q:\n%s", want, b)
		}
	}
}

// The driver answer "precompiled where the registry has the kernel's image" is --precompiled auto,
// offered only where the operator installs the driver; a flag's --precompiled auto is the first answer.
func TestPrecompiledDriverChoice(t *testing.T) {
	kubeadm := profile.Profile{Name: "kubeadm", Values: map[string]any{"driver": map[string]any{"enabled": true}}}
	gke := profile.Profile{Name: "gke", Values: map[string]any{"driver": map[string]any{"enabled": false}}}
	openshift := profile.Profile{Name: "openshift", Values: map[string]any{}}
	profiles := []profile.Profile{kubeadm, gke, openshift}
	if o := options(engine.InstallOptions{}, "kubeadm", profiles, choices{Profile: "kubeadm", Driver: driverPrecompiled}); o.Precompiled != plan.PrecompiledAuto {
		t.Errorf("precompiled answer: --precompiled %q, want auto", o.Precompiled)
	}
	if o := options(engine.InstallOptions{Precompiled: plan.PrecompiledAuto}, "kubeadm", profiles, choices{Profile: "kubeadm", Driver: driverContainer}); o.Precompiled != "" {
		t.Errorf("the compiled answer keeps --precompiled %q from the flags", o.Precompiled)
	}
	offers := func(p profile.Profile) bool {
		return slices.ContainsFunc(driverField(p).options, func(o option) bool { return o.value == driverPrecompiled })
	}
	if !offers(kubeadm) || offers(gke) || offers(openshift) {
		t.Errorf("precompiled offered on kubeadm %v, gke %v, openshift %v; want kubeadm only", offers(kubeadm), offers(gke), offers(openshift))
	}
	if c := initialChoices(engine.InstallOptions{Precompiled: plan.PrecompiledAuto}, "kubeadm", false, profiles); c.Driver != driverPrecompiled {
		t.Errorf("initial driver %q with --precompiled auto", c.Driver)
	}
}
