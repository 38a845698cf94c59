package distro_test

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/distro"
	"github.com/gpuctl/gpuctl/internal/profile"
	"github.com/gpuctl/gpuctl/profiles"
)

// Every distribution in the registry has its profile in profiles/, and every profile there is a
// distribution's: a distribution added without its profile, or a profile left behind, fails here.
func TestEveryDistributionHasAProfileAndEveryProfileADistribution(t *testing.T) {
	files, err := fs.Glob(profiles.FS, "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var inDir, inRegistry []string
	for _, f := range files {
		inDir = append(inDir, strings.TrimSuffix(f, ".yaml"))
	}
	for _, d := range distro.All() {
		if d.Profile == "" {
			t.Errorf("%s names no profile", d.Name)
			continue
		}
		inRegistry = append(inRegistry, d.Profile)
		if !slices.Contains(inDir, d.Profile) {
			t.Errorf("%s's profile %s is not in profiles/ (add profiles/%s.yaml)", d.Name, d.Profile, d.Profile)
		}
	}
	for _, p := range inDir {
		if !slices.Contains(inRegistry, p) {
			t.Errorf("profiles/%s.yaml is no distribution's profile (add internal/distro/%s.go, or remove the file)", p, p)
		}
	}
}

// The registry: unique names, lookups by name and profile, detection's order, one fallback.
func TestTheRegistry(t *testing.T) {
	all := distro.All()
	t.Run("names are unique and Get finds each", func(t *testing.T) {
		seen := map[string]bool{}
		for _, d := range all {
			if d.Name == "" || d.Title == "" || d.Short == "" || seen[d.Name] {
				t.Errorf("distribution %+v: a unique name, a title and a short name are needed", d.Name)
			}
			seen[d.Name] = true
			if got := distro.Get(d.Name); got.Name != d.Name {
				t.Errorf("Get(%q) = %q", d.Name, got.Name)
			}
			if got := distro.ForProfile(d.Profile); got.Name != d.Name {
				t.Errorf("ForProfile(%q) = %q, want %s", d.Profile, got.Name, d.Name)
			}
		}
	})
	t.Run("an unknown name gets the zero Distribution, with no quirks", func(t *testing.T) {
		for _, name := range []string{"", "talos", "OpenShift"} {
			if d := distro.Get(name); d.Name != "" || d.OLM || d.Containerd != nil || d.Profile != "" {
				t.Errorf("Get(%q) = %+v, want the zero Distribution", name, d)
			}
		}
	})
	t.Run("detection's order: OpenShift first, the kubeadm fallback last", func(t *testing.T) {
		var names []string
		for _, d := range all {
			names = append(names, d.Name)
		}
		want := []string{"openshift", "gke", "eks", "aks", "tkgs", "rke2", "k3s", "microk8s", "k0s", "kubeadm"}
		if !slices.Equal(names, want) {
			t.Errorf("All() = %v, want %v", names, want)
		}
	})
	t.Run("one fallback, whose profile is the default profile", func(t *testing.T) {
		var fallbacks []string
		for _, d := range all {
			if d.Fallback {
				fallbacks = append(fallbacks, d.Profile)
			}
		}
		if !slices.Equal(fallbacks, []string{profile.Default}) {
			t.Errorf("fallback profiles %v, want [%s] (profile.Default)", fallbacks, profile.Default)
		}
	})
	t.Run("each call returns a fresh list", func(t *testing.T) {
		a := distro.All()
		a[0].Signals[0].Weight = 0
		a[0].OLM = false
		if b := distro.All(); b[0].Signals[0].Weight == 0 || !b[0].OLM {
			t.Error("a change to All()'s result shows in the next call")
		}
	})
}

// The quirks the plan, preflight, the engine and export branch on, by distribution.
func TestQuirks(t *testing.T) {
	type quirks struct{ olm, noPrecompiled, migReboot, driverInstaller, runtimeClass, psp bool }
	want := map[string]quirks{
		distro.OpenShift: {olm: true, noPrecompiled: true},
		distro.GKE:       {migReboot: true, driverInstaller: true},
		distro.TKGS:      {psp: true},
		distro.RKE2:      {runtimeClass: true},
		distro.K3s:       {runtimeClass: true},
	}
	for _, d := range distro.All() {
		got := quirks{d.OLM, d.NoPrecompiledDriver != "", d.MIGReboot, d.DriverInstaller, d.RuntimeClass, d.PrivilegedPSP}
		if got != want[d.Name] {
			t.Errorf("%s: quirks %+v, want %+v", d.Name, got, want[d.Name])
		}
	}
}

// Every signal says where it looks and has what that place needs, so detection can evaluate it.
func TestSignalsAreWellFormed(t *testing.T) {
	text := []distro.Where{distro.NodeName, distro.Kernel, distro.OSImage, distro.Runtime, distro.ProviderID, distro.Version, distro.Warning}
	check := func(owner string, s distro.Signal) {
		if s.Weight < 1 || s.Weight > 100 {
			t.Errorf("%s: %s signal of weight %d, want 1–100", owner, s.In, s.Weight)
		}
		m := s.Match
		hasMatch := m.Prefix != "" || m.Suffix != "" || len(m.Contains) > 0 || m.Excludes != "" || m.Is != nil
		switch {
		case slices.Contains(text, s.In):
			if !hasMatch {
				t.Errorf("%s: %s signal without a Match would match every value", owner, s.In)
			}
		case s.In == distro.Label:
			if (len(s.Keys) > 0) == (len(s.Prefixes) > 0) {
				t.Errorf("%s: label signal %+v: Keys or Prefixes, one of them", owner, s)
			}
		case s.In == distro.Annotation:
			if len(s.Prefixes) == 0 || len(s.Keys) > 0 {
				t.Errorf("%s: annotation signal %+v: Prefixes", owner, s)
			}
		case s.In == distro.APIGroup:
			if s.Name == "" {
				t.Errorf("%s: api group signal without a group", owner)
			}
		case s.In == distro.ConfigMap, s.In == distro.Workload:
			if ns, name, ok := strings.Cut(s.Name, "/"); !ok || ns == "" || name == "" {
				t.Errorf("%s: %s signal names %q, want namespace/name", owner, s.In, s.Name)
			}
		case s.In == distro.ClusterVersion, s.In == distro.ManagedControlPlane:
		default:
			t.Errorf("%s: signal looks at %q, which detection does not read", owner, s.In)
		}
	}
	for _, d := range distro.All() {
		if len(d.Signals) == 0 {
			t.Errorf("%s has no signals: detection can never choose it", d.Name)
		}
		for _, s := range d.Signals {
			check(d.Name, s)
		}
		if d.Unsupported != nil {
			for _, s := range d.Unsupported.Signals {
				check(d.Name+" "+d.Unsupported.Name, s)
			}
		}
	}
}
