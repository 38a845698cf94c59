// Command probe loads an NVML library the way NVIDIA's device plugin does (go-nvml's
// nvml.New(nvml.WithLibraryPath(lib)), go-nvlib's device library over it) and prints, as JSON, what
// it reports: driver versions, each GPU and each MIG device with its profile as go-nvlib names it.
// It also checks what a report cannot show (handles stable across nvmlInit, event sets that time out,
// a wrong UUID refused, concurrent calls and garbage collection in both Go runtimes) and lists what
// failed under "problems".
//
// The mock NVML library's tests (package mocknvml) build and run it against the library and compare
// its report with the config; it is a separate program because loading the library needs cgo and a
// process of its own (the library stays loaded, NODELETE). It never changes a GPU.
package main
