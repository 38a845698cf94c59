// Package mockserver turns a mocknvml.Config into an nvml.Interface: go-nvml's own Go mock
// (github.com/NVIDIA/go-nvml pkg/nvml/mock and its dgxa100 server, at the version go.mod selects)
// with one dgxa100.Device per configured GPU, and what that mock leaves out added: any number of GPUs
// of any known model, MIG device handles (nvmlDeviceGetMigDeviceHandleByIndex and the calls on
// them), GPU and compute instances looked up by ID, and MIG profile tables for models other than the
// A100-40GB. The mock NVML library (package mocknvml/lib) serves this interface through the NVML C
// ABI; tests drive it directly with go-nvlib, as NVIDIA's device plugin does.
//
// It deliberately models a node at rest: the calls that change a GPU (MIG mode, creating or
// destroying instances) are go-nvml's mock defaults at best and are not exported by the library;
// every call the mock has no function for panics in go-nvml's mock, which the library turns into
// NVML_ERROR_NOT_SUPPORTED.
package mockserver
