package deviceplugin

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// migResourcePrefix begins the resources of MIG devices under the mixed strategy
// (nvidia.com/mig-1g.10gb; NVIDIA/k8s-device-plugin README.md "MIG support", v0.20.0).
const migResourcePrefix = "nvidia.com/mig-"

// MIG strategies (the plugin's --mig-strategy, the ClusterPolicy's spec.mig.strategy).
const (
	MIGNone   = "none"
	MIGSingle = "single"
	MIGMixed  = "mixed"
)

// Advertisement is what a node shows once the device plugin and GPU feature discovery run on it.
type Advertisement struct {
	// Resources are the extended resources the plugin registers with the kubelet, by name.
	Resources map[corev1.ResourceName]int64
	// Labels are GPU feature discovery's labels for the node's GPUs, their MIG devices and sharing.
	Labels map[string]string
}

// Advertise works out what NVIDIA's device plugin registers and what GPU feature discovery labels for a
// node's GPUs (hw), the plugin's config, its MIG strategy and the node's MIG layout:
//
//   - MIG (NVIDIA/k8s-device-plugin README.md "MIG support" and docs/gpu-feature-discovery labels at
//     v0.20.0): none advertises every GPU as nvidia.com/gpu; single advertises the MIG devices as
//     nvidia.com/gpu when every GPU has MIG on with one profile (or every GPU as a whole when none
//     has), and refuses anything else; mixed advertises nvidia.com/mig-<profile> per profile and the
//     GPUs without MIG as nvidia.com/gpu.
//   - Sharing (README.md "Shared Access to GPUs"; NVIDIA cloud-native-docs gpu-operator/gpu-sharing.rst):
//     each listed resource's devices are advertised replicas times, as the resource itself, as
//     <name>.shared with renameByDefault, or as its rename; GFD labels nvidia.com/gpu.replicas and
//     nvidia.com/gpu.sharing-strategy, and suffixes nvidia.com/gpu.product with -SHARED unless the
//     replicas are renamed. MPS also labels nvidia.com/mps.capable=true.
//
// A layout the strategy refuses is a *ConfigError, as the real plugin exits on it.
func Advertise(hw standin.Hardware, cfg PluginConfig, migStrategy string, layout standin.MIGLayout) (Advertisement, error) {
	ad := Advertisement{Resources: map[corev1.ResourceName]int64{}, Labels: map[string]string{}}
	if hw.GPUs <= 0 {
		return ad, nil
	}
	if migStrategy == "" {
		migStrategy = MIGNone
	}
	product := hw.GPUProduct
	count := hw.GPUs
	migGPUs := 0
	for i := range hw.GPUs {
		if layout.Enabled(i) {
			migGPUs++
		}
	}
	profiles := layout.Profiles()
	migDevices := func(profile string) int64 {
		n := 0
		for i := range hw.GPUs {
			if layout.Enabled(i) {
				n += layout.GPUs[i][profile]
			}
		}
		return int64(n)
	}
	switch migStrategy {
	case MIGNone:
		ad.Resources[GPUResource] = int64(hw.GPUs)
	case MIGSingle:
		switch {
		case migGPUs == 0:
			ad.Resources[GPUResource] = int64(hw.GPUs)
		case migGPUs != hw.GPUs:
			return ad, configErrorf("mig strategy single: %d of %d GPUs have MIG enabled; want all or none", migGPUs, hw.GPUs)
		case len(profiles) != 1:
			return ad, configErrorf("mig strategy single: more than one MIG profile on the node (%s)", strings.Join(profiles, ", "))
		default:
			n := migDevices(profiles[0])
			ad.Resources[GPUResource] = n
			product += "-MIG-" + profiles[0]
			count = int(n)
		}
	case MIGMixed:
		if whole := hw.GPUs - migGPUs; whole > 0 {
			ad.Resources[GPUResource] = int64(whole)
		}
		for _, p := range profiles {
			n := migDevices(p)
			ad.Resources[corev1.ResourceName(migResourcePrefix+p)] = n
			ad.Labels[migResourcePrefix[len("nvidia.com/"):]+p+".count"] = strconv.FormatInt(n, 10)
		}
	default:
		return ad, configErrorf("unknown mig strategy %q", migStrategy)
	}
	// GFD names the labels without the nvidia.com/ prefix above; add it to all of them at the end.

	strategy, rr := cfg.SharingStrategy()
	replicas := 1
	shared := false
	if rr != nil {
		for _, r := range rr.Resources {
			have, ok := ad.Resources[r.Name]
			if !ok {
				continue
			}
			k, err := r.deviceCount(int(have))
			if err != nil {
				return ad, err
			}
			name := r.sharedName(rr.RenameByDefault)
			ad.Resources[r.Name] = have - int64(k)
			ad.Resources[name] += int64(k * r.Replicas)
			if r.Name == GPUResource {
				replicas = r.Replicas
				shared = name == GPUResource
			}
		}
	}
	for name, n := range ad.Resources {
		if n == 0 && name != GPUResource {
			delete(ad.Resources, name)
		}
	}
	if shared {
		product += "-SHARED"
	}
	ad.Labels["gpu.product"] = product
	ad.Labels["gpu.count"] = strconv.Itoa(count)
	ad.Labels["gpu.replicas"] = strconv.Itoa(replicas)
	ad.Labels["gpu.sharing-strategy"] = strategy
	ad.Labels["mig.capable"] = strconv.FormatBool(standin.MIGProfiles(hw.GPUProduct) != nil)
	ad.Labels["mig.strategy"] = migStrategy
	ad.Labels["mps.capable"] = strconv.FormatBool(strategy == StrategyMPS)
	labels := make(map[string]string, len(ad.Labels))
	for k, v := range ad.Labels {
		labels["nvidia.com/"+k] = v
	}
	ad.Labels = labels
	return ad, nil
}

// String is a one-line summary for the sandbox's log.
func (a Advertisement) String() string {
	var parts []string
	for _, name := range sortedNames(a.Resources) {
		parts = append(parts, fmt.Sprintf("%s: %d", name, a.Resources[name]))
	}
	return strings.Join(parts, ", ")
}
