package mockserver

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml"
)

// TestProfileNamesAreTheModelsOwn: the profile tables, named by go-nvlib as NVIDIA's device plugin
// names them, give each model exactly the GPU instance profiles the config package lists for it.
func TestProfileNamesAreTheModelsOwn(t *testing.T) {
	for _, m := range mocknvml.Models() {
		if !m.MIGCapable() {
			if len(profilesFor(m).gi) != 0 {
				t.Errorf("%s: not MIG capable but has profiles", m.Name)
			}
			continue
		}
		byName, err := profilesFor(m).names(m.MemoryMiB)
		if err != nil {
			t.Fatal(err)
		}
		var gis []string
		for name := range byName {
			if !strings.Contains(strings.SplitN(name, ".", 2)[0], "c") {
				gis = append(gis, name)
			}
		}
		if got, want := slices.Sorted(slices.Values(gis)), slices.Sorted(slices.Values(m.MIGProfiles)); !slices.Equal(got, want) {
			t.Errorf("%s: profiles named %v, want %v", m.Name, got, want)
		}
	}
}

func newServer(t *testing.T, model string, n int, mig map[int][]string) *Server {
	t.Helper()
	cfg, err := mocknvml.NewConfig("node-a", model, n)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range slices.Sorted(maps.Keys(mig)) {
		if err := cfg.EnableMIG(i, mig[i]...); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestGoNvlibSeesTheConfig walks the server with go-nvlib's device library, as the device plugin does.
func TestGoNvlibSeesTheConfig(t *testing.T) {
	s := newServer(t, mocknvml.A100SXM440GB, 2, map[int][]string{0: {"1g.5gb", "3g.20gb"}, 1: {"1c.3g.20gb"}})
	lib := device.New(s)
	var got []string
	err := lib.VisitDevices(func(i int, d device.Device) error {
		enabled, err := d.IsMigEnabled()
		if err != nil || !enabled {
			t.Errorf("gpu %d: MIG enabled %v, %v", i, enabled, err)
		}
		return d.VisitMigDevices(func(j int, m device.MigDevice) error {
			p, err := m.GetProfile()
			if err != nil {
				return err
			}
			mem, ret := m.GetMemoryInfo()
			if ret != nvml.SUCCESS {
				return ret
			}
			got = append(got, p.String()+"/"+strings.TrimSuffix(uintString(mem.Total>>20), ""))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1g.5gb/4864", "3g.20gb/19968", "1c.3g.20gb/19968"}
	if !slices.Equal(got, want) {
		t.Errorf("MIG devices %v, want %v", got, want)
	}
}

func uintString(v uint64) string {
	return strings.TrimLeft(string([]byte{byte('0' + v/10000%10), byte('0' + v/1000%10), byte('0' + v/100%10), byte('0' + v/10%10), byte('0' + v%10)}), "0")
}

// TestNotMIGCapable: a T4 answers GetMigMode with NOT_SUPPORTED, which go-nvlib reads as not capable.
func TestNotMIGCapable(t *testing.T) {
	s := newServer(t, mocknvml.TeslaT4, 1, nil)
	d, err := device.New(s).GetDevices()
	if err != nil || len(d) != 1 {
		t.Fatalf("devices %v, %v", d, err)
	}
	if capable, err := d[0].IsMigCapable(); capable || err != nil {
		t.Errorf("T4 MIG capable %v, %v", capable, err)
	}
	if migs, err := d[0].GetMigDevices(); len(migs) != 0 || err != nil {
		t.Errorf("T4 MIG devices %v, %v", migs, err)
	}
}

// TestUnknownProfile: a profile the model does not offer fails New, naming the ones it does.
func TestUnknownProfile(t *testing.T) {
	cfg, _ := mocknvml.NewConfig("n", mocknvml.H100SXM80GB, 1)
	cfg.GPUs[0].MIGEnabled = true
	cfg.GPUs[0].MIGDevices = []mocknvml.MIGDevice{{Profile: "1c.7g.80gb", UUID: "MIG-x", GPUInstanceID: 1}}
	if _, err := New(cfg); err != nil {
		t.Fatalf("1c.7g.80gb on an H100: %v", err)
	}
	cfg.GPUs[0].MIGDevices[0].Profile = "5c.7g.80gb"
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "7g.80gb") {
		t.Errorf("5c.7g.80gb: %v", err)
	}
}
