package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml"
	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml/internal/mockserver"
)

//go:generate go run ../internal/gen -lib .

func main() {}

// traceEnv turns on a line on stderr per call.
const traceEnv = "GPUCTL_MOCK_NVML_TRACE"

var (
	// mu guards server and refs: nvmlInit reads the config on the first of nested calls and
	// nvmlShutdown drops it on the last, as NVML counts them.
	mu     sync.Mutex
	server *mockserver.Server
	refs   int
	trace  = os.Getenv(traceEnv) != ""
)

// ret is an nvmlReturn_t for C.
func ret(r nvml.Return) int32 { return int32(r) }

// current is the server while NVML is initialised, else nil.
func current() *mockserver.Server {
	mu.Lock()
	defer mu.Unlock()
	return server
}

// call runs f on the initialised server: NVML_ERROR_UNINITIALIZED before nvmlInit, and
// NVML_ERROR_NOT_SUPPORTED where go-nvml's mock has no function for what f asks (it panics).
func call(name string, f func(s *mockserver.Server) nvml.Return) (r int32) {
	s := current()
	if s == nil {
		logCall(name, nvml.ERROR_UNINITIALIZED, "")
		return ret(nvml.ERROR_UNINITIALIZED)
	}
	defer func() {
		if p := recover(); p != nil {
			logCall(name, nvml.ERROR_NOT_SUPPORTED, fmt.Sprint(p))
			r = ret(nvml.ERROR_NOT_SUPPORTED)
		}
	}()
	result := f(s)
	logCall(name, result, "")
	return ret(result)
}

// notSupported is every stub's answer.
func notSupported(name string) int32 {
	logCall(name, nvml.ERROR_NOT_SUPPORTED, "not implemented")
	return ret(nvml.ERROR_NOT_SUPPORTED)
}

func logCall(name string, r nvml.Return, why string) {
	if !trace {
		return
	}
	if why != "" {
		why = " (" + why + ")"
	}
	fmt.Fprintf(os.Stderr, "mocknvml: %s: %s%s\n", name, nvml.ErrorString(r), why)
}

// putString copies s into the caller's buffer of length bytes, NUL-terminated.
func putString(buf *C.char, length uint32, s string) nvml.Return {
	if buf == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	if uint32(len(s))+1 > length {
		return nvml.ERROR_INSUFFICIENT_SIZE
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(buf)), length)
	copy(b, s)
	b[len(s)] = 0
	return nvml.SUCCESS
}

// errorStrings are nvmlErrorString's answers, C strings made once per code and never freed (NVML's
// are static too).
var errorStrings sync.Map

//export nvmlErrorString
func nvmlErrorString(result int32) *C.char {
	if s, ok := errorStrings.Load(result); ok {
		return s.(*C.char)
	}
	// go-nvml's own strings (pkg/nvml/return.go, defaultErrorStringFunc): package nvml in this
	// library never loads a library, so nvml.ErrorString answers with them.
	s, _ := errorStrings.LoadOrStore(result, C.CString(nvml.ErrorString(nvml.Return(result))))
	return s.(*C.char)
}

// initialise reads the config at the first of nested nvmlInit calls.
func initialise(name string) int32 {
	mu.Lock()
	defer mu.Unlock()
	if refs > 0 {
		refs++
		logCall(name, nvml.SUCCESS, fmt.Sprintf("nested, %d", refs))
		return ret(nvml.SUCCESS)
	}
	s, err := load()
	if err != nil {
		fmt.Fprintf(os.Stderr, "mocknvml: %s: %v\n", name, err)
		return ret(nvml.ERROR_UNKNOWN)
	}
	handles.rebind(s)
	server, refs = s, 1
	logCall(name, nvml.SUCCESS, fmt.Sprintf("%d GPUs", len(s.GPUs())))
	return ret(nvml.SUCCESS)
}

func load() (*mockserver.Server, error) {
	path := os.Getenv(mocknvml.ConfigEnv)
	if path == "" {
		return nil, fmt.Errorf("%s is not set: the mock NVML has no GPUs to report", mocknvml.ConfigEnv)
	}
	cfg, err := mocknvml.Read(path)
	if err != nil {
		return nil, err
	}
	return mockserver.New(cfg)
}

//export nvmlInit
func nvmlInit() int32 { return initialise("nvmlInit") }

//export nvmlInit_v2
func nvmlInit_v2() int32 { return initialise("nvmlInit_v2") }

// nvmlInitWithFlags ignores the flags (NVML_INIT_FLAG_NO_GPUS, NO_ATTACH): a config with no GPUs
// initialises anyway, and nothing is attached.
//
//export nvmlInitWithFlags
func nvmlInitWithFlags(flags uint32) int32 { return initialise("nvmlInitWithFlags") }

//export nvmlShutdown
func nvmlShutdown() int32 {
	mu.Lock()
	defer mu.Unlock()
	if refs == 0 {
		logCall("nvmlShutdown", nvml.ERROR_UNINITIALIZED, "")
		return ret(nvml.ERROR_UNINITIALIZED)
	}
	refs--
	if refs == 0 {
		server = nil
	}
	logCall("nvmlShutdown", nvml.SUCCESS, fmt.Sprintf("%d left", refs))
	return ret(nvml.SUCCESS)
}
