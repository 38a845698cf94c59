// Package migmanager stands in for NVIDIA's MIG manager (k8s-mig-manager, the GPU operator's
// nvidia-mig-manager DaemonSet) on the sandbox's kwok nodes, which have no GPUs to partition: while a
// MIG-manager pod runs on a node, the node's nvidia.com/mig.config label picks a config of NVIDIA's
// mig-parted (NVIDIA/mig-parted, the operator's default-mig-parted-config ConfigMap, or the one the
// pod mounts at /mig-parted-config), the stand-in applies it to the node's simulated GPUs and drives
// nvidia.com/mig.config.state through pending to success, or to failed when a GPU cannot take it
// (NVIDIA/mig-parted deployments/gpu-operator/reconfigure-mig.go at v0.15.0; the operator's
// docs, https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-mig.html). The
// MIG devices it applied are the GPUs' state (standin.MIGHardware, in the sandbox's memory, as MIG mode
// lives on the GPU), which the device-plugin stand-in reads where the real plugin asks NVML. Open it when MIG reconfiguration in the sandbox does not do what NVIDIA's does; the device
// plugin's side is in package deviceplugin.
//
// # NVIDIA's code and ours
//
// mig-parted's own packages (github.com/NVIDIA/mig-parted v0.10.0, the newest release the Go module
// proxy serves) judge the stand-in in its tests, not in the sandbox: its api/spec/v1 imports
// pkg/types, which imports go-nvml's pkg/nvml, whose cgo calls into libnvidia-ml are left unresolved
// at link time (-Wl,--unresolved-symbols=ignore-in-object-files) for the library to supply. The
// sandbox and e2e binaries also link Go's plugin package (through helm's kustomize), and with cgo the
// Go linker then binds every symbol at start (-Wl,-z,now, cmd/link/internal/ld/lib.go), so such a
// binary exits before main on a machine without libnvidia-ml ("symbol lookup error: undefined
// symbol: nvmlDeviceGetDramEncryptionMode"). So the stand-in reads the file with its own struct
// (Configs), and its tests read every file they use, and the default-mig-parted-config of every
// operator release gpuctl installs, with mig-parted's Spec too, and require the same configs and
// entries, each applied to the same GPUs by mig-parted's MatchesDeviceFilter and MatchesDevices
// (agreeWithMigParted).
//
// What differs from the real MIG manager, which cannot run here: it needs NVML and GPUs (mig-parted
// apply drives them through go-nvml), a host root to chroot into, and systemd for the GPU clients it
// stops. So, written here rather than NVIDIA's:
//   - validation: the stand-in refuses (state failed, in mig-parted apply's words) a file that is
//     not YAML or not version v1, and a config name the file lacks; mig-parted also refuses unknown
//     fields, empty configs, entries without devices or mig-enabled, mig-devices with MIG off or
//     missing with it on, and malformed profile names or negative counts (api/spec/v1/spec.go,
//     pkg/types/mig_config.go at v0.10.0), which the stand-in reads instead
//     (TestParseConfigsBesideMigParted lists each);
//   - the GPUs' answer: which profiles a GPU offers and how many instances of each it holds
//     (standin.MIGProfiles, from NVIDIA's MIG user guide) and its seven compute slices; NVML's
//     placement rules beyond the slices are not modelled, and compute-instance profiles
//     (1c.2g.20gb) are refused as unknown where NVML would create them;
//   - the walk: WalkSelectedMigConfigForEachGPU enumerates the GPUs through NVML; Apply walks the
//     entries over the node's simulated GPUs in the same order;
//   - the manager's protocol: no pause of the GPU operands (nvidia.com/gpu.deploy.* =
//     paused-for-mig-change) and their restart, no host GPU clients stopped, no node reboot
//     (WITH_REBOOT), no checkpoint; the layout is applied at once and the state label written with
//     the field manager of the kubectl label the real manager runs;
//   - versions: GPU Operator v26.7.0 deploys MIG manager v0.15.0, built from a newer mig-parted than
//     the v0.10.0 the tests check against; and the profile-name check mig-parted delegates to
//     github.com/NVIDIA/go-nvlib (pkg/nvlib/device) runs at the version this module's graph selects
//     (the device plugin's, newer than the v0.7.0 mig-parted v0.10.0 was released with).
package migmanager
