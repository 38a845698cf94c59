package mockserver

import (
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml"
)

// Server is the NVML of one node: go-nvml's mock.Interface with the functions set from a Config.
type Server struct {
	mock.Interface
	mock.ExtendedInterface
	cfg  mocknvml.Config
	gpus []*GPU
}

var _ nvml.Interface = (*Server)(nil)

// New builds the node's NVML. It fails when the config names a MIG profile its GPU's model does not
// offer (by go-nvlib's name for it).
func New(cfg mocknvml.Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg}
	for i, g := range cfg.GPUs {
		gpu, err := newGPU(i, g)
		if err != nil {
			return nil, fmt.Errorf("gpu %d (%s): %w", i, g.UUID, err)
		}
		s.gpus = append(s.gpus, gpu)
	}
	s.setFuncs()
	return s, nil
}

// GPUs are the node's GPUs, by index.
func (s *Server) GPUs() []*GPU { return s.gpus }

func (s *Server) setFuncs() {
	s.ExtensionsFunc = func() nvml.ExtendedInterface { return s }
	// Every NVML function exists in the library (its stubs answer NVML_ERROR_NOT_SUPPORTED).
	s.LookupSymbolFunc = func(string) error { return nil }
	s.InitFunc = func() nvml.Return { return nvml.SUCCESS }
	s.ShutdownFunc = func() nvml.Return { return nvml.SUCCESS }
	s.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return s.cfg.DriverVersion, nvml.SUCCESS }
	s.SystemGetNVMLVersionFunc = func() (string, nvml.Return) { return s.cfg.NVMLVersionOrDefault(), nvml.SUCCESS }
	s.SystemGetCudaDriverVersionFunc = func() (int, nvml.Return) { return s.cfg.CUDADriverVersion, nvml.SUCCESS }
	s.SystemGetCudaDriverVersion_v2Func = s.SystemGetCudaDriverVersionFunc
	s.DeviceGetCountFunc = func() (int, nvml.Return) { return len(s.gpus), nvml.SUCCESS }
	s.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= len(s.gpus) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return s.gpus[i].Device, nvml.SUCCESS
	}
	s.DeviceGetHandleByUUIDFunc = s.byUUID
	s.DeviceGetHandleByPciBusIdFunc = s.byPCIBusID
}

// byUUID finds a GPU or a MIG device (NVML finds both by UUID).
func (s *Server) byUUID(uuid string) (nvml.Device, nvml.Return) {
	for _, g := range s.gpus {
		if g.UUID == uuid {
			return g.Device, nvml.SUCCESS
		}
		for _, m := range g.migs {
			if m.cfg.UUID == uuid {
				return m, nvml.SUCCESS
			}
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}

// byPCIBusID accepts NVML's "00000000:10:00.0" and the short "0000:10:00.0", in either case.
func (s *Server) byPCIBusID(id string) (nvml.Device, nvml.Return) {
	want := strings.ToLower(id)
	for _, g := range s.gpus {
		full := strings.ToLower(g.PciBusID)
		if want == full || "0000"+want == full {
			return g.Device, nvml.SUCCESS
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}
