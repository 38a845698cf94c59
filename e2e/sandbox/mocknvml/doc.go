// Package mocknvml describes the GPUs of one simulated node for the sandbox's mock NVML library
// (libnvidia-ml.so.1, built from package mocknvml/lib by toolchain.EnsureMockNVML): a Config is a
// JSON file, named by the environment variable ConfigEnv, that the library reads at nvmlInit.
// NVIDIA's own device plugin and GPU feature discovery then see that node's GPUs, MIG devices and
// driver version through the NVML C ABI, as on a real node.
//
// The sandbox writes a Config per simulated node (NewConfig, Config.EnableMIG, Config.Write); the
// library reads it (Read). The package knows the GPU models the sandbox simulates (Models: NVML's
// product name, memory, architecture, CUDA compute capability, PCI device ID and the MIG profiles
// a model offers), so a config says "8 × NVIDIA A100-SXM4-40GB" and gets sensible values.
//
// It deliberately imports nothing of go-nvml: go-nvml's package nvml is cgo whose NVML calls are left
// unresolved at link time, and a sandbox binary that links it would not start without a real
// libnvidia-ml (see package standin/migmanager's doc). So the MIG profiles here are names only
// ("1g.5gb"); the profile facts NVML reports for them (memory, slices, engines) live with the library
// (package mocknvml/internal/mockserver), whose tests check that both agree.
//
// It does not model what NVML changes at run time (MIG reconfiguration, XID events, utilisation):
// a config is the node's state at nvmlInit; the library reads it again at the next first nvmlInit.
package mocknvml
