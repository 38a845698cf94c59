package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

const libDir = "../../lib"

// cgoCall finds go-nvml's calls into NVML (C.nvmlX( in pkg/nvml/nvml.go).
var cgoCall = regexp.MustCompile(`\bC\.(nvml\w+)\(`)

// TestStubsAreCurrent fails when lib/zz_generated_stubs.go is not what `go generate` writes now (a hand
// implementation added or removed, or go-nvml upgraded).
func TestStubsAreCurrent(t *testing.T) {
	want, err := Generate(libDir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(libDir, GeneratedFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go generate ./e2e/sandbox/mocknvml/lib", GeneratedFile)
	}
}

// TestFunctions reads declarations the way nvml.h writes them, and not ones in comments.
func TestFunctions(t *testing.T) {
	h := []byte(`
/** nvmlReturn_t DECLDIR nvmlInComment(void); */
nvmlReturn_t DECLDIR nvmlInit_v2(void);
DEPRECATED(13.0) nvmlReturn_t DECLDIR nvmlDeviceGetX(nvmlDevice_t device,
                                                   unsigned int *x);
const DECLDIR char* nvmlErrorString(nvmlReturn_t result);
// nvmlReturn_t DECLDIR nvmlLineComment(void);
`)
	got := Functions(h)
	want := []string{"nvmlDeviceGetX", "nvmlErrorString", "nvmlInit_v2"}
	if !slices.Equal(got, want) {
		t.Errorf("Functions = %v, want %v", got, want)
	}
}

// TestHeaderHasEveryCgoCall: every C function go-nvml's package calls is declared in the header the
// stubs come from (else the library could lack a symbol go-nvml calls).
func TestHeaderHasEveryCgoCall(t *testing.T) {
	header, err := HeaderPath(libDir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := os.ReadFile(header)
	if err != nil {
		t.Fatal(err)
	}
	declared := Functions(h)
	src, err := os.ReadFile(filepath.Join(filepath.Dir(header), "nvml.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range cgoCall.FindAllSubmatch(src, -1) {
		if !slices.Contains(declared, string(m[1])) {
			t.Errorf("go-nvml calls C.%s, which nvml.h does not declare", m[1])
		}
	}
}
