package mocknvml

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestNewConfigDescribesTheModel(t *testing.T) {
	for _, tc := range []struct {
		model, arch string
		mem         uint64
		major, min  int
		mig         bool
	}{
		{A100SXM440GB, "Ampere", 40960, 8, 0, true},
		{"NVIDIA-A100-80GB-PCIe", "Ampere", 81920, 8, 0, true},
		{H100SXM80GB, "Hopper", 81559, 9, 0, true},
		{"Tesla-T4", "Turing", 15360, 7, 5, false},
		{L4, "Ada Lovelace", 23034, 8, 9, false},
	} {
		c, err := NewConfig("node-a", tc.model, 3)
		if err != nil {
			t.Fatalf("%s: %v", tc.model, err)
		}
		if len(c.GPUs) != 3 {
			t.Fatalf("%s: %d GPUs", tc.model, len(c.GPUs))
		}
		g := c.GPUs[2]
		got := []any{g.Architecture, g.MemoryMiB, g.CudaComputeCapability, g.MIGCapable, g.MIGEnabled}
		want := []any{tc.arch, tc.mem, ComputeCapability{tc.major, tc.min}, tc.mig, false}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", tc.model, got, want)
		}
		if g.PCIBusID != "00000000:12:00.0" || !strings.HasPrefix(g.UUID, "GPU-") {
			t.Errorf("%s: bus %s, UUID %s", tc.model, g.PCIBusID, g.UUID)
		}
	}
	if _, err := NewConfig("n", "NVIDIA B300", 1); err == nil {
		t.Error("an unknown model was accepted")
	}
}

func TestUUIDsDifferByNodeAndStay(t *testing.T) {
	a1, _ := NewConfig("node-a", TeslaT4, 2)
	a2, _ := NewConfig("node-a", TeslaT4, 2)
	b, _ := NewConfig("node-b", TeslaT4, 2)
	if a1.GPUs[0].UUID != a2.GPUs[0].UUID {
		t.Error("a node's UUIDs changed from one config to the next")
	}
	if a1.GPUs[0].UUID == b.GPUs[0].UUID || a1.GPUs[0].UUID == a1.GPUs[1].UUID {
		t.Error("UUIDs repeat across GPUs or nodes")
	}
}

func TestEnableMIG(t *testing.T) {
	c, _ := NewConfig("n", A100SXM440GB, 2)
	if err := c.EnableMIG(0, "1g.5gb", "1g.5gb", "3g.20gb", "1c.2g.10gb"); err != nil {
		t.Fatal(err)
	}
	d := c.GPUs[0].MIGDevices
	if len(d) != 4 || d[2].GPUInstanceID != 3 || d[2].ComputeInstanceID != 0 || !strings.HasPrefix(d[3].UUID, "MIG-") {
		t.Errorf("MIG devices %+v", d)
	}
	for _, bad := range [][]string{
		{"1g.10gb+me"},           // not an A100-40GB profile
		{"7g.40gb", "1g.5gb"},    // eight compute slices
		{"3c.2g.10gb"},           // more compute than GPU slices
		{"1g"},                   // malformed
		{"2g.10gb", "4g.20gb.x"}, // malformed
	} {
		c, _ := NewConfig("n", A100SXM440GB, 1)
		if err := c.EnableMIG(0, bad...); err == nil {
			t.Errorf("EnableMIG(%v) accepted", bad)
		}
	}
	t4, _ := NewConfig("n", TeslaT4, 1)
	if err := t4.EnableMIG(0); err == nil {
		t.Error("MIG enabled on a T4")
	}
}

func TestWriteRead(t *testing.T) {
	c, _ := NewConfig("n", H100SXM80GB, 2)
	if err := c.EnableMIG(1, "1g.10gb", "2g.20gb"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sub", "nvml.json")
	if err := c.Write(path); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("read back %+v, want %+v", got, c)
	}
	b, _ := os.ReadFile(path)
	typo := strings.Replace(string(b), `"driverVersion"`, `"driverVersoin"`, 1)
	if err := os.WriteFile(path, []byte(typo), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil || !strings.Contains(err.Error(), "driverVersoin") {
		t.Errorf("a misspelt field was read: %v", err)
	}
}

func TestValidateRefuses(t *testing.T) {
	base, _ := NewConfig("n", A100SXM440GB, 2)
	for name, edit := range map[string]func(c *Config){
		"driver version": func(c *Config) { c.DriverVersion = "550" },
		"duplicate UUID": func(c *Config) { c.GPUs[1].UUID = c.GPUs[0].UUID },
		"duplicate bus":  func(c *Config) { c.GPUs[1].PCIBusID = c.GPUs[0].PCIBusID },
		"MIG off, devices": func(c *Config) {
			c.GPUs[0].MIGDevices = []MIGDevice{{Profile: "1g.5gb", UUID: "MIG-a"}}
		},
		"MIG on, not capable": func(c *Config) { c.GPUs[0].MIGCapable, c.GPUs[0].MIGEnabled = false, true },
	} {
		c := base
		c.GPUs = append([]GPU(nil), base.GPUs...)
		edit(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseProfile(t *testing.T) {
	for in, want := range map[string]Profile{
		"1g.5gb":     {"1g.5gb", 1, 1},
		"1g.5gb+me":  {"1g.5gb+me", 1, 1},
		"1c.3g.20gb": {"3g.20gb", 3, 1},
		"7g.80gb":    {"7g.80gb", 7, 7},
	} {
		got, err := ParseProfile(in)
		if err != nil || got != want {
			t.Errorf("ParseProfile(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
}
