package migmanager

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	migspec "github.com/NVIDIA/mig-parted/api/spec/v1"
	migtypes "github.com/NVIDIA/mig-parted/pkg/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/standintest"
	"github.com/gpuctl/gpuctl/e2e/upstream"
	"github.com/gpuctl/gpuctl/internal/bundle"
)

// testConfigs is a mig-parted config in NVIDIA's format with configs named like the operator's
// default ones; its layouts are the tests' own.
const testConfigs = `
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.10gb:
    - device-filter: ["0x233010DE", "0x20B510DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
    - device-filter: "0x20B010DE"
      devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 4}
  all-2g.20gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"2g.20gb": 3}
  first-only:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
  too-many:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 8}
  over-slices:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 2, "2g.20gb": 1}
  compute-instance:
    - devices: all
      mig-enabled: true
      mig-devices: {"1c.2g.20gb": 2}
`

// Where mig-parted v0.10.0 refuses a config file, in its own words (NVIDIA/mig-parted at v0.10.0).
const (
	citeSpec      = "api/spec/v1/spec.go, (*Spec).UnmarshalJSON"
	citeEntry     = "api/spec/v1/spec.go, (*MigConfigSpec).UnmarshalJSON"
	citeMigConfig = "pkg/types/mig_config.go, MigConfig.AssertValidFormat"
)

// TestParseConfigsBesideMigParted reads each file with mig-parted's own types (api/spec/v1) and with
// the stand-in: both read the valid ones; mig-parted refuses the invalid ones in the words given, and
// the stand-in refuses only those it is marked to (the rest is the gap the package doc names).
func TestParseConfigsBesideMigParted(t *testing.T) {
	entry := func(lines string) string { return "version: v1\nmig-configs:\n  c:\n    - " + lines }
	for _, tc := range []struct {
		name string
		file string
		// words are mig-parted's refusal ("" for a file it reads); cite is where it says them.
		words, cite string
		// standInRefuses: the stand-in refuses it too, with mig-parted apply's words.
		standInRefuses bool
	}{
		{name: "the tests' config is read", file: testConfigs},
		{name: "a device filter, a device list, a +me profile and a zero count are read",
			file: entry(`device-filter: ["0x233010DE"]` + "\n      devices: [0, 1]\n      mig-enabled: true\n      mig-devices: {\"1g.10gb+me\": 1, \"2g.20gb\": 0, \"3g.40gb\": 2}")},
		{name: "a file without a version is refused", file: "mig-configs:\n  c:\n    - devices: all\n      mig-enabled: false",
			words: "unable to parse with missing 'version' field", cite: citeSpec, standInRefuses: true},
		{name: "version v2 is refused", file: "version: v2\nmig-configs: {}", words: "unknown version: v2", cite: citeSpec, standInRefuses: true},
		{name: "a misspelt top-level key is refused", file: "version: v1\nmig-config:\n  c: []", words: "unexpected field: mig-config", cite: citeSpec},
		{name: "no configs at all are refused", file: "version: v1\nmig-configs: {}", words: "at least one entry in 'mig-configs' is required", cite: citeSpec},
		{name: "a config without entries is refused", file: "version: v1\nmig-configs:\n  empty: []", words: "at least one entry in 'empty' is required", cite: citeSpec},
		{name: "an entry without devices is refused", file: entry("mig-enabled: false"), words: "missing required field: devices", cite: citeEntry},
		{name: "an entry without mig-enabled is refused", file: entry("devices: all"), words: "missing required field: mig-enabled", cite: citeEntry},
		{name: "devices other than all or a list are refused", file: entry("devices: some\n      mig-enabled: false"),
			words: "invalid string input for 'devices': some", cite: citeEntry},
		{name: "a misspelt entry key is refused", file: entry("devices: all\n      mig-enabled: true\n      mig-device: {\"1g.10gb\": 7}"),
			words: "unexpected field: mig-device", cite: citeEntry},
		{name: "MIG on without mig-devices is refused", file: entry("devices: all\n      mig-enabled: true"),
			words: "missing required field 'mig-devices' when 'mig-enabled' is true", cite: citeEntry},
		{name: "mig-devices with MIG off are refused", file: entry("devices: all\n      mig-enabled: false\n      mig-devices: {\"1g.10gb\": 7}"),
			words: "MIG devices included when 'mig-enabled' is false", cite: citeEntry},
		{name: "a config name's .me spelling as a profile is refused", file: entry("devices: all\n      mig-enabled: true\n      mig-devices: {\"1g.10gb.me\": 1}"),
			words: "invalid format for '1g.10gb.me'", cite: citeMigConfig},
		{name: "a profile without its memory unit is refused", file: entry("devices: all\n      mig-enabled: true\n      mig-devices: {\"1g.10\": 7}"),
			words: "invalid format for '1g.10'", cite: citeMigConfig},
		{name: "a negative count is refused", file: entry("devices: all\n      mig-enabled: true\n      mig-devices: {\"1g.10gb\": -1, \"2g.20gb\": 1}"),
			words: "invalid count for", cite: citeMigConfig},
		{name: "only zero counts are refused", file: entry("devices: all\n      mig-enabled: true\n      mig-devices: {\"1g.10gb\": 0}"),
			words: "all counts for all MigProfiles are 0", cite: citeMigConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var spec migspec.Spec
			migErr := yaml.Unmarshal([]byte(tc.file), &spec)
			cfgs, err := ParseConfigs([]byte(tc.file))
			if tc.words == "" {
				if migErr != nil || err != nil {
					t.Fatalf("mig-parted: %v; the stand-in: %v; want both to read it", migErr, err)
				}
				agreeWithMigParted(t, cfgs, spec)
				return
			}
			if migErr == nil || !strings.Contains(migErr.Error(), tc.words) {
				t.Errorf("mig-parted: %v; want %q (%s)", migErr, tc.words, tc.cite)
			}
			var applyErr *ApplyError
			switch {
			case tc.standInRefuses && (!errors.As(err, &applyErr) || !strings.HasPrefix(err.Error(), "error parsing config file: unmarshal error: ") || !strings.Contains(err.Error(), tc.words)):
				t.Errorf("the stand-in: %v; want an *ApplyError \"error parsing config file: unmarshal error: …%s…\"", err, tc.words)
			case !tc.standInRefuses && err != nil:
				t.Errorf("the stand-in refuses it (%v): mark it standInRefuses", err)
			}
		})
	}
}

// agreeWithMigParted checks that the stand-in read a file as mig-parted's own types did: the same
// configs and entries, and each entry applied to the same GPUs (mig-parted's MatchesDeviceFilter
// and MatchesDevices, api/spec/v1/helpers.go at v0.10.0) for every GPU model of the sandbox and
// GPU indices 0 to 7.
func agreeWithMigParted(t *testing.T, cfgs Configs, spec migspec.Spec) {
	t.Helper()
	if !slices.Equal(slices.Sorted(maps.Keys(cfgs.MigConfigs)), slices.Sorted(maps.Keys(spec.MigConfigs))) {
		t.Fatalf("configs %v, mig-parted's %v", slices.Sorted(maps.Keys(cfgs.MigConfigs)), slices.Sorted(maps.Keys(spec.MigConfigs)))
	}
	for name, entries := range spec.MigConfigs {
		mine := cfgs.MigConfigs[name]
		if len(mine) != len(entries) {
			t.Fatalf("%s: %d entries, mig-parted's %d", name, len(mine), len(entries))
		}
		for i, e := range entries {
			if mine[i].MigEnabled != e.MigEnabled || !maps.Equal(mine[i].MigDevices, map[string]int(e.MigDevices)) {
				t.Errorf("%s entry %d: %v %v, mig-parted's %v %v", name, i, mine[i].MigEnabled, mine[i].MigDevices, e.MigEnabled, e.MigDevices)
			}
			for _, m := range standin.GPUModels() {
				device, _ := strconv.ParseUint(m.Device, 16, 16)
				id := migtypes.NewDeviceID(uint16(device), 0x10de)
				if got, want := mine[i].matchesFilter(pciDeviceID(m.Product)), e.MatchesDeviceFilter(id); got != want {
					t.Errorf("%s entry %d on %s (%v): the stand-in's device filter says %v, mig-parted's %v", name, i, m.Product, id, got, want)
				}
				for gpu := range 8 {
					if got, want := mine[i].matchesDevice(gpu), e.MatchesDevices(gpu); got != want {
						t.Errorf("%s entry %d, GPU %d: the stand-in's devices say %v, mig-parted's %v", name, i, gpu, got, want)
					}
				}
			}
		}
	}
}

func TestApplyPartitionsLikeMigParted(t *testing.T) {
	cfgs, err := ParseConfigs([]byte(testConfigs))
	if err != nil {
		t.Fatal(err)
	}
	h100 := standin.Hardware{GPUs: 2, GPUProduct: standin.GPUH100SXM80}
	a100 := standin.Hardware{GPUs: 2, GPUProduct: standin.GPUA100SXM40}
	l4 := standin.Hardware{GPUs: 1, GPUProduct: standin.GPUL4}
	on := func(gpus ...map[string]int) standin.MIGLayout { return standin.MIGLayout{GPUs: gpus} }
	for _, tc := range []struct {
		name   string
		config string
		hw     standin.Hardware
		from   standin.MIGLayout
		want   standin.MIGLayout
		failed bool
		words  string
	}{
		{name: "all-1g.10gb on an H100: seven 1g.10gb per GPU", config: "all-1g.10gb", hw: h100,
			want: on(map[string]int{"1g.10gb": 7}, map[string]int{"1g.10gb": 7})},
		{name: "all-1g.10gb on an A100 40GB: its own entry, four per GPU", config: "all-1g.10gb", hw: a100,
			want: on(map[string]int{"1g.10gb": 4}, map[string]int{"1g.10gb": 4})},
		{name: "all-1g.10gb on an L4: no entry matches its device, nothing changes", config: "all-1g.10gb", hw: l4, want: on(nil)},
		{name: "all-2g.20gb on an L4 fails: no MIG", config: "all-2g.20gb", hw: l4, failed: true},
		{name: "all-2g.20gb on an A100 40GB fails: no such profile", config: "all-2g.20gb", hw: a100, failed: true},
		{name: "more instances than a GPU holds fail", config: "too-many", hw: h100, failed: true},
		{name: "more than seven compute slices fail", config: "over-slices", hw: h100, failed: true},
		{name: "an unknown config fails", config: "all-9g.90gb", hw: h100, failed: true,
			words: "error selecting MIG config: selected mig-config not present: all-9g.90gb"},
		{name: "a compute-instance profile fails: the stand-in's GPUs offer GPU-instance profiles only", config: "compute-instance", hw: h100, failed: true},
		{name: "all-disabled turns MIG off", config: "all-disabled", hw: h100,
			from: on(map[string]int{"1g.10gb": 7}, map[string]int{"1g.10gb": 7}), want: on(nil, nil)},
		{name: "a device list leaves the other GPUs as they were", config: "first-only", hw: h100,
			from: on(nil, map[string]int{"1g.10gb": 7}), want: on(map[string]int{"3g.40gb": 2}, map[string]int{"1g.10gb": 7})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cfgs.Apply(tc.config, tc.hw, tc.from)
			var applyErr *ApplyError
			if tc.failed {
				if !errors.As(err, &applyErr) {
					t.Fatalf("Apply = %v, %v; want an *ApplyError", got, err)
				}
				if !strings.Contains(err.Error(), tc.words) {
					t.Errorf("Apply: %v; want %q", err, tc.words)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.GPUs) != len(tc.want.GPUs) || got.Config != tc.config {
				t.Fatalf("Apply = %+v, want %+v", got, tc.want)
			}
			for i := range got.GPUs {
				if !maps.Equal(got.GPUs[i], tc.want.GPUs[i]) || got.Enabled(i) != tc.want.Enabled(i) {
					t.Errorf("GPU %d: %v, want %v", i, got.GPUs[i], tc.want.GPUs[i])
				}
			}
		})
	}
}

func TestMIGManagerStandInDrivesTheStateLabel(t *testing.T) {
	cs := fake.NewClientset(
		standintest.Node("h100-0", "6.8.0", map[string]string{ConfigLabel: "all-1g.10gb"}),
		standintest.Node("l4-0", "6.8.0", map[string]string{ConfigLabel: "all-2g.20gb"}),
		standintest.Node("h100-idle", "6.8.0", map[string]string{ConfigLabel: "all-1g.10gb"}),
		standintest.Node("h100-own", "6.8.0", map[string]string{ConfigLabel: "all-1g.10gb"}),
	)
	hw := map[string]standin.Hardware{
		"h100-0":    {GPUs: 1, GPUProduct: standin.GPUH100SXM80},
		"l4-0":      {GPUs: 1, GPUProduct: standin.GPUL4},
		"h100-idle": {GPUs: 1, GPUProduct: standin.GPUH100SXM80},
		"h100-own":  {GPUs: 1, GPUProduct: standin.GPUH100SXM80},
	}
	ctx := context.Background()
	// The operator's DaemonSet mounts its ConfigMap; default-mig-parted-config does not exist here, so
	// the fallback is read. h100-own's pod mounts a user's file that mig-parted refuses (no version).
	standintest.CreateTyped(t, cs.CoreV1().ConfigMaps("gpu-operator").Create, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-operator", Name: "my-mig-config"},
		Data:       map[string]string{configKey: "mig-configs:\n  all-1g.10gb:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {\"1g.10gb\": 7}\n"},
	})
	pod := func(node, configMap string) *corev1.Pod {
		p := standintest.Pod("gpu-operator", "nvidia-mig-manager-"+node, node, true, corev1.Container{
			Name: "nvidia-mig-manager", Image: "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0",
			VolumeMounts: []corev1.VolumeMount{{Name: "mig-parted-config", MountPath: configMountPath}},
		})
		p.Spec.Volumes = []corev1.Volume{{Name: "mig-parted-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}}}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "nvidia-mig-manager"}}
		return p
	}
	for _, n := range []string{"h100-0", "l4-0"} {
		standintest.CreateTyped(t, cs.CoreV1().Pods("gpu-operator").Create, pod(n, "default-mig-parted-config"))
	}
	standintest.CreateTyped(t, cs.CoreV1().Pods("gpu-operator").Create, pod("h100-own", "my-mig-config"))
	mig := standin.NewMIGHardware()
	standintest.Start(t, func(ctx context.Context, logf func(string, ...any)) error {
		return Run(ctx, cs, hw, mig, func() ([]byte, error) { return []byte(testConfigs), nil }, logf)
	})
	expect := func(node, state, layout string) func(ctx context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			n, err := standintest.GetNode(ctx, cs, node)
			if err != nil {
				return "", err
			}
			got, l := n.Labels[StateLabel], ""
			if applied := mig.Layout(node); applied.Config != "" {
				l = applied.Encode()
			}
			if got != state || l != layout {
				return fmt.Sprintf("%s: state %q layout %q, want %q and %q", node, got, l, state, layout), nil
			}
			if len(n.Annotations) > 0 {
				return fmt.Sprintf("%s: annotations %v: the GPUs' MIG state is not the API's", node, n.Annotations), nil
			}
			return "", nil
		}
	}
	standintest.EventuallyOK(t, "the H100 node is partitioned", expect("h100-0", StateSuccess, `{"config":"all-1g.10gb","gpus":[{"1g.10gb":7}]}`))
	standintest.EventuallyOK(t, "the L4 node fails", expect("l4-0", StateFailed, ""))
	standintest.EventuallyOK(t, "a config file mig-parted refuses fails the node", expect("h100-own", StateFailed, ""))
	standintest.ConsistentlyOK(t, "without a MIG-manager pod nothing happens", 300*time.Millisecond, expect("h100-idle", "", ""))

	// The admin picks another config: pending, then success with the new layout.
	if _, err := cs.CoreV1().Nodes().Patch(ctx, "h100-0", types.MergePatchType, []byte(`{"metadata":{"labels":{"nvidia.com/mig.config":"all-disabled"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	standintest.EventuallyOK(t, "all-disabled turns MIG off", expect("h100-0", StateSuccess, `{"config":"all-disabled","gpus":[null]}`))
}

// TestOperatorsDefaultConfigIsReadByMigParted: every release gpuctl installs ships a
// default-mig-parted-config (assets/state-mig-manager/0400_configmap.yaml of NVIDIA/gpu-operator at
// the release's tag) that mig-parted's own types read, the stand-in reads it as they do, and it
// partitions the sandbox's GPUs from it as its device filters say.
func TestOperatorsDefaultConfigIsReadByMigParted(t *testing.T) {
	for _, b := range bundle.List() {
		t.Run(b.Version, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(upstream.TreeT(t, b.Version), "assets", "state-mig-manager", "0400_configmap.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var cm corev1.ConfigMap
			if err := yaml.Unmarshal(data, &cm); err != nil {
				t.Fatal(err)
			}
			var spec migspec.Spec
			if err := yaml.Unmarshal([]byte(cm.Data[configKey]), &spec); err != nil {
				t.Fatalf("mig-parted's types refuse the operator's own config: %v", err)
			}
			cfgs, err := ParseConfigs([]byte(cm.Data[configKey]))
			if err != nil {
				t.Fatalf("the stand-in refuses the operator's own config: %v", err)
			}
			agreeWithMigParted(t, cfgs, spec)
			for _, tc := range []struct {
				config string
				hw     standin.Hardware
				want   map[string]int
			}{
				{"all-1g.10gb", standin.Hardware{GPUs: 1, GPUProduct: standin.GPUH100SXM80}, map[string]int{"1g.10gb": 7}},
				{"all-1g.10gb", standin.Hardware{GPUs: 1, GPUProduct: standin.GPUA100SXM40}, map[string]int{"1g.10gb": 4}},
				{"all-1g.5gb", standin.Hardware{GPUs: 1, GPUProduct: standin.GPUA100SXM40}, map[string]int{"1g.5gb": 7}},
				{"all-disabled", standin.Hardware{GPUs: 1, GPUProduct: standin.GPUH100SXM80}, nil},
			} {
				got, err := cfgs.Apply(tc.config, tc.hw, standin.MIGLayout{})
				if err != nil || len(got.GPUs) != 1 || !maps.Equal(got.GPUs[0], tc.want) {
					t.Errorf("%s on %s: %+v, %v; want %v", tc.config, tc.hw.GPUProduct, got, err, tc.want)
				}
			}
		})
	}
}
