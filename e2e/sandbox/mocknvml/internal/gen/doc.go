// Command gen writes the mock NVML library's stubs (mocknvml/lib/zz_generated_stubs.go): one exported
// function answering NVML_ERROR_NOT_SUPPORTED for every function go-nvml's nvml.h declares
// (github.com/NVIDIA/go-nvml pkg/nvml/nvml.h, at the version go.mod selects) that the library does not
// implement by hand. go-nvml's cgo calls every one of them, unresolved until the library is loaded, and
// a call to a symbol the library lacks kills the host process ("symbol lookup error"); the stubs make
// every such call an error NVML's callers handle instead.
//
// `go generate ./e2e/sandbox/mocknvml/lib` runs it; its test fails when the committed file is stale.
// It reads only the header's function names: stubs take no parameters (the C calling convention lets a
// caller pass arguments a callee ignores) and return nvmlReturn_t, an int. It does not stub the one
// function that returns something else, nvmlErrorString, which the library must implement (checked).
package main
