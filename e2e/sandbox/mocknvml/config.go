package mocknvml

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ConfigEnv names the environment variable whose value is the path of the Config the mock NVML
// library reads at nvmlInit.
const ConfigEnv = "GPUCTL_MOCK_NVML_CONFIG"

// Defaults of NewConfig: the driver of go-nvml's dgxa100 mock (pkg/nvml/mock/dgxa100/dgxa100.go:
// DriverVersion "550.54.15", CudaDriverVersion 12040).
const (
	DefaultDriverVersion     = "550.54.15"
	DefaultCUDADriverVersion = 12040
)

// Config is what one simulated node's NVML reports.
type Config struct {
	// DriverVersion is nvmlSystemGetDriverVersion's answer ("550.54.15").
	DriverVersion string `json:"driverVersion"`
	// CUDADriverVersion is nvmlSystemGetCudaDriverVersion's answer: 1000*major + 10*minor (12040 is
	// CUDA 12.4).
	CUDADriverVersion int `json:"cudaDriverVersion"`
	// NVMLVersion is nvmlSystemGetNVMLVersion's answer; empty means "12." + DriverVersion, the form
	// dgxa100's mock uses ("12.550.54.15").
	NVMLVersion string `json:"nvmlVersion,omitempty"`
	// GPUs are the node's GPUs; a GPU's index (and minor number, /dev/nvidiaN) is its position here.
	GPUs []GPU `json:"gpus"`
}

// GPU is one physical GPU.
type GPU struct {
	// Model is the product name NVML reports ("NVIDIA A100-SXM4-40GB").
	Model string `json:"model"`
	// MemoryMiB is the total memory in MiB.
	MemoryMiB uint64 `json:"memoryMiB"`
	// UUID is the GPU's UUID, "GPU-" and a UUID.
	UUID string `json:"uuid"`
	// PCIBusID is NVML's bus ID, "00000000:10:00.0" (domain:bus:device.function).
	PCIBusID string `json:"pciBusID"`
	// PCIDeviceID is nvmlPciInfo_t.pciDeviceId (device ID << 16 | 0x10de).
	PCIDeviceID uint32 `json:"pciDeviceID"`
	// Architecture is go-nvlib's name of the architecture ("Ampere", "Hopper", "Ada Lovelace").
	Architecture string `json:"architecture"`
	// CudaComputeCapability is the CUDA compute capability.
	CudaComputeCapability ComputeCapability `json:"cudaComputeCapability"`
	// MIGCapable says whether nvmlDeviceGetMigMode answers (else NVML_ERROR_NOT_SUPPORTED).
	MIGCapable bool `json:"migCapable"`
	// MIGEnabled is the current (and pending) MIG mode.
	MIGEnabled bool `json:"migEnabled"`
	// MIGDevices are the GPU's MIG devices (one GPU instance with one compute instance each); only
	// with MIGEnabled.
	MIGDevices []MIGDevice `json:"migDevices,omitempty"`
}

// ComputeCapability is a CUDA compute capability (8.0 for the A100).
type ComputeCapability struct {
	Major int `json:"major"`
	Minor int `json:"minor"`
}

// MIGDevice is a GPU instance and the compute instance in it that together form one MIG device.
type MIGDevice struct {
	// Profile is the MIG profile as go-nvlib names it: "1g.5gb", "3g.20gb", "1g.5gb+me", or with a
	// smaller compute instance "1c.3g.20gb".
	Profile string `json:"profile"`
	// UUID is the MIG device's UUID, "MIG-" and a UUID.
	UUID string `json:"uuid"`
	// GPUInstanceID and ComputeInstanceID are the instances' IDs on the GPU.
	GPUInstanceID     int `json:"gpuInstanceID"`
	ComputeInstanceID int `json:"computeInstanceID"`
}

// NewConfig describes n GPUs of a known model (LookupModel) on the node named node, MIG off. UUIDs
// derive from the node's name and the GPU's index, so two nodes' GPUs differ and a node's stay the
// same from one run to the next.
func NewConfig(node, model string, n int) (Config, error) {
	m, ok := LookupModel(model)
	if !ok {
		return Config{}, fmt.Errorf("mocknvml: unknown GPU model %q", model)
	}
	cfg := Config{DriverVersion: DefaultDriverVersion, CUDADriverVersion: DefaultCUDADriverVersion}
	for i := range n {
		cfg.GPUs = append(cfg.GPUs, GPU{
			Model:                 m.Name,
			MemoryMiB:             m.MemoryMiB,
			UUID:                  "GPU-" + stableUUID(node, strconv.Itoa(i)),
			PCIBusID:              fmt.Sprintf("00000000:%02X:00.0", 0x10+i),
			PCIDeviceID:           m.PCIDeviceID,
			Architecture:          m.Architecture,
			CudaComputeCapability: ComputeCapability{m.ComputeMajor, m.ComputeMinor},
			MIGCapable:            m.MIGCapable(),
		})
	}
	return cfg, nil
}

// EnableMIG turns MIG mode on for GPU i and gives it one MIG device per profile, in order: GPU
// instance IDs 1, 2, … and compute instance 0 in each (NVML numbers them by placement; the sandbox
// only needs them distinct). No profiles leaves MIG on with no devices.
func (c *Config) EnableMIG(i int, profiles ...string) error {
	if i < 0 || i >= len(c.GPUs) {
		return fmt.Errorf("mocknvml: no GPU %d", i)
	}
	g := &c.GPUs[i]
	g.MIGEnabled, g.MIGDevices = true, nil
	for j, p := range profiles {
		g.MIGDevices = append(g.MIGDevices, MIGDevice{
			Profile:       p,
			UUID:          "MIG-" + stableUUID(g.UUID, strconv.Itoa(j), p),
			GPUInstanceID: j + 1,
		})
	}
	return c.Validate()
}

// stableUUID formats a hash of parts as a UUID (version 5 layout, SHA-256 instead of SHA-1).
func stableUUID(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// Write stores the config as JSON at path.
func (c Config) Write(path string) error {
	if err := c.Validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Read loads and validates the config at path. Unknown fields are an error, so a typo does not
// silently leave a default.
func Read(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("mocknvml: read %s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("mocknvml: %s: %w", path, err)
	}
	return c, nil
}

// NVMLVersionOrDefault is the NVML version the library reports.
func (c Config) NVMLVersionOrDefault() string {
	if c.NVMLVersion != "" {
		return c.NVMLVersion
	}
	return "12." + c.DriverVersion
}

// Validate checks what NVML's callers rely on: a driver version "X.Y[.Z]" (GPU feature discovery
// refuses any other, internal/lm/nvml.go at k8s-device-plugin v0.19.0), distinct UUIDs and bus IDs,
// and MIG devices only where MIG is on, of profiles the model offers, within its seven compute slices.
func (c Config) Validate() error {
	if n := len(strings.Split(c.DriverVersion, ".")); n < 2 || n > 3 {
		return fmt.Errorf("driver version %q is not X.Y[.Z]", c.DriverVersion)
	}
	if c.CUDADriverVersion <= 0 {
		return errors.New("cudaDriverVersion must be positive (12040 is CUDA 12.4)")
	}
	seen := map[string]bool{}
	for i, g := range c.GPUs {
		if err := g.validate(seen); err != nil {
			return fmt.Errorf("gpu %d: %w", i, err)
		}
	}
	return nil
}

func (g GPU) validate(seen map[string]bool) error {
	if g.Model == "" || g.MemoryMiB == 0 {
		return errors.New("model and memoryMiB are required")
	}
	for _, id := range []string{g.UUID, g.PCIBusID} {
		if id == "" || seen[id] {
			return fmt.Errorf("UUID and PCI bus ID must be set and unique (%q)", id)
		}
		seen[id] = true
	}
	if !strings.HasPrefix(g.UUID, "GPU-") {
		return fmt.Errorf("UUID %q does not start with GPU-", g.UUID)
	}
	if g.MIGEnabled && !g.MIGCapable {
		return errors.New("MIG is enabled on a GPU that is not MIG capable")
	}
	if len(g.MIGDevices) > 0 && !g.MIGEnabled {
		return errors.New("MIG devices on a GPU with MIG disabled")
	}
	return g.validateMIG(seen)
}

func (g GPU) validateMIG(seen map[string]bool) error {
	m, known := LookupModel(g.Model)
	if len(g.MIGDevices) > 0 && !known {
		return fmt.Errorf("MIG devices on %q, a model without known MIG profiles", g.Model)
	}
	slices, gis := 0, map[int]bool{}
	for _, d := range g.MIGDevices {
		gi, err := ParseProfile(d.Profile)
		if err != nil {
			return err
		}
		if !contains(m.MIGProfiles, gi.GPUInstance) {
			return fmt.Errorf("%s offers no MIG profile %q (it offers %s)", g.Model, gi.GPUInstance, strings.Join(m.MIGProfiles, ", "))
		}
		if !strings.HasPrefix(d.UUID, "MIG-") || seen[d.UUID] || gis[d.GPUInstanceID] {
			return fmt.Errorf("MIG device %s: UUID must start with MIG- and it and the GPU instance ID must be unique", d.UUID)
		}
		seen[d.UUID], gis[d.GPUInstanceID] = true, true
		slices += gi.GPUSlices
	}
	if slices > 7 {
		return fmt.Errorf("MIG devices take %d compute slices, more than a GPU's 7", slices)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Profile is a parsed MIG profile name.
type Profile struct {
	// GPUInstance is the GPU instance profile ("3g.20gb" of "1c.3g.20gb").
	GPUInstance string
	// GPUSlices and ComputeSlices are the g and c counts (3 and 1 of "1c.3g.20gb"; c = g without "c").
	GPUSlices, ComputeSlices int
}

// ParseProfile splits "[Nc.]Mg.Xgb[+attr]" into its GPU instance profile and slice counts.
func ParseProfile(s string) (Profile, error) {
	bad := fmt.Errorf("MIG profile %q is not [Nc.]Mg.Xgb[+attr]", s)
	parts := strings.SplitN(s, ".", 3)
	c := 0
	if len(parts) == 3 && strings.HasSuffix(parts[0], "c") {
		n, err := strconv.Atoi(strings.TrimSuffix(parts[0], "c"))
		if err != nil || n < 1 {
			return Profile{}, bad
		}
		c, parts = n, parts[1:]
	} else {
		parts = strings.SplitN(s, ".", 2)
	}
	if len(parts) != 2 || !strings.HasSuffix(parts[0], "g") || !strings.Contains(parts[1], "gb") {
		return Profile{}, bad
	}
	g, err := strconv.Atoi(strings.TrimSuffix(parts[0], "g"))
	if err != nil || g < 1 || c > g {
		return Profile{}, bad
	}
	if c == 0 {
		c = g
	}
	return Profile{GPUInstance: parts[0] + "." + parts[1], GPUSlices: g, ComputeSlices: c}, nil
}
