// Command lib is the sandbox's mock NVML: built with `go build -buildmode=c-shared` into
// libnvidia-ml.so.1 (toolchain.EnsureMockNVML), it exports the NVML C ABI that go-nvml dlopens
// (github.com/NVIDIA/go-nvml pkg/nvml/lib.go: "libnvidia-ml.so.1", RTLD_LAZY|RTLD_GLOBAL), so that
// NVIDIA's own device plugin and GPU feature discovery, unchanged, see the GPUs of the node whose
// mocknvml.Config the environment variable GPUCTL_MOCK_NVML_CONFIG names. The GPUs come from package
// mocknvml/internal/mockserver, which builds go-nvml's Go mock (dgxa100) from the config; this package
// only translates between that nvml.Interface and C.
//
// Every function go-nvml's nvml.h declares is exported: those NVIDIA's device plugin and GFD v0.19.0
// call on their paths (and go-nvlib's pkg/nvlib/device and info, and go-gpuallocator's topology,
// under them) by hand, in main.go (init, shutdown, error strings), system.go, device.go, mig.go,
// instances.go and events.go; all others by generated stubs (zz_generated_stubs.go, `go generate`)
// that answer NVML_ERROR_NOT_SUPPORTED, which those callers tolerate where they reach them (fabric
// info, NVLink state, addressing mode). A hand-implemented function the mock has no answer for
// answers NVML_ERROR_NOT_SUPPORTED too. GPUCTL_MOCK_NVML_TRACE=1 logs every call and its result to
// stderr: the way to find what a new caller needs.
//
// The ABI: exported functions take handles as uintptr and structs as unsafe.Pointer, and write the
// structs through go-nvml's Go types, which cgo -godefs generated from the same nvml.h (types_gen.go);
// the few structs that hold handles are mirrored here (abi.go). No file includes nvml.h: cgo copies
// an exporting file's preamble into _cgo_export.h, where nvml.h's prototypes would clash with the
// exports' own. Handles are C memory (one malloc'd byte per GPU, MIG device, GPU or compute instance
// and event set), stable for the process: the same device keeps its handle across nvmlShutdown and
// nvmlInit, even when the config is read again. No Go pointer is passed to C.
//
// Loaded into a Go program (the device plugin is one), the library brings a second Go runtime into the
// process. Go's c-shared build links it -Bsymbolic with NODELETE (so go-nvlib's dlclose after probing
// is harmless) and static TLS; the tests run go-nvml, go-nvlib and NVIDIA's GFD against it.
//
// It does not change GPUs (MIG mode, instance creation: stubs), deliver events (an event set's wait
// times out), or report utilisation, clocks, processes, NVLink or fabric state (stubs).
package main
