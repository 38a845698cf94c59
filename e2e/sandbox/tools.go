package sandbox

import (
	"context"
	"io"

	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
)

// The tool cache lives in package toolchain; these names keep the façade's API (e2e tests,
// e2e/cmd/sandbox) as it was.

// Tools are the built programs and the data files that come with them (toolchain.Tools).
type Tools = toolchain.Tools

// OperatorBuild is one GPU operator controller in the tool cache (toolchain.OperatorBuild).
type OperatorBuild = toolchain.OperatorBuild

// Versions of the real programs the sandbox runs (see package toolchain).
const (
	KubernetesVersion     = toolchain.KubernetesVersion
	EtcdVersion           = toolchain.EtcdVersion
	KwokVersion           = toolchain.KwokVersion
	OperatorModuleVersion = toolchain.OperatorModuleVersion
	CacheEnv              = toolchain.CacheEnv

	FluxSourceControllerVersion = toolchain.FluxSourceControllerVersion
	FluxHelmControllerVersion   = toolchain.FluxHelmControllerVersion
	RegistryVersion             = toolchain.RegistryVersion
	NFDVersion                  = toolchain.NFDVersion
	DevicePluginVersion         = toolchain.DevicePluginVersion
)

// NFD are Node Feature Discovery's programs in the tool cache (toolchain.NFD).
type NFD = toolchain.NFD

// EnsureNFD builds nfd-master, nfd-worker and nfd-gc (toolchain.EnsureNFD).
func EnsureNFD(ctx context.Context, cacheDir string, progress io.Writer) (*NFD, error) {
	return toolchain.EnsureNFD(ctx, cacheDir, progress)
}

// DevicePlugin are NVIDIA's device plugin programs in the tool cache (toolchain.DevicePlugin).
type DevicePlugin = toolchain.DevicePlugin

// EnsureDevicePlugin builds NVIDIA's device plugin, GFD and config-manager (toolchain.EnsureDevicePlugin).
func EnsureDevicePlugin(ctx context.Context, cacheDir string, progress io.Writer) (*DevicePlugin, error) {
	return toolchain.EnsureDevicePlugin(ctx, cacheDir, progress)
}

// EnsureMockNVML builds the mock libnvidia-ml.so.1 (toolchain.EnsureMockNVML).
func EnsureMockNVML(ctx context.Context, cacheDir string, progress io.Writer) (string, error) {
	return toolchain.EnsureMockNVML(ctx, cacheDir, progress)
}

// Flux are Flux's controllers in the tool cache (toolchain.Flux).
type Flux = toolchain.Flux

// EnsureFlux builds Flux's source-controller and helm-controller (toolchain.EnsureFlux).
func EnsureFlux(ctx context.Context, cacheDir string, progress io.Writer) (*Flux, error) {
	return toolchain.EnsureFlux(ctx, cacheDir, progress)
}

// EnsureRegistry builds the OCI registry (toolchain.EnsureRegistry).
func EnsureRegistry(ctx context.Context, cacheDir string, progress io.Writer) (string, error) {
	return toolchain.EnsureRegistry(ctx, cacheDir, progress)
}

// EnsureTools builds what is missing from the tool cache and returns the tools (toolchain.EnsureTools).
func EnsureTools(ctx context.Context, cacheDir string, progress io.Writer) (*Tools, error) {
	return toolchain.EnsureTools(ctx, cacheDir, progress)
}

// EnsureHelmCLI builds Helm's own CLI, v4 (toolchain.EnsureHelmCLI).
func EnsureHelmCLI(ctx context.Context, progress io.Writer) (string, error) {
	return toolchain.EnsureHelmCLI(ctx, progress)
}

// EnsureHelm3CLI builds Helm's v3 CLI (toolchain.EnsureHelm3CLI).
func EnsureHelm3CLI(ctx context.Context, progress io.Writer) (string, error) {
	return toolchain.EnsureHelm3CLI(ctx, progress)
}

// DefaultCacheDir is where built tools are kept unless Options.CacheDir says otherwise.
func DefaultCacheDir() (string, error) { return toolchain.DefaultCacheDir() }

// ToolsSourceDir is the e2e/tools directory the tools are built from (toolchain.ToolsSourceDir).
func ToolsSourceDir() (string, error) { return toolchain.ToolsSourceDir() }
