package toolchain

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// DevicePluginVersion is NVIDIA's device plugin (github.com/NVIDIA/k8s-device-plugin), pinned by
// e2e/tools/deviceplugin/go.mod: the version gpuctl's go.mod requires.
const DevicePluginVersion = "v0.19.0"

// devicePluginCommit is the commit of the v0.19.0 tag, which NVIDIA's Makefile links in as
// info.gitCommit (`git describe --long --always --abbrev=40`); the Go module proxy records it as the
// version's origin (github.com/NVIDIA/k8s-device-plugin/@v/v0.19.0.info, Origin.Hash).
const devicePluginCommit = "1ae8e5f02a47ad80e2b4fcc6c35a757c61ddd81f"

// DevicePlugin are the programs of NVIDIA's device plugin image in the tool cache.
type DevicePlugin struct {
	// Plugin, GFD and ConfigManager are absolute paths of nvidia-device-plugin, gpu-feature-discovery
	// and config-manager; MPSControlDaemon of mps-control-daemon.
	Plugin, GFD, ConfigManager, MPSControlDaemon string
}

// devicePluginLDFlags are NVIDIA's own linker flags (Makefile at v0.19.0: BUILDFLAGS, with
// CLI_VERSION = VERSION from versions.mk and CLI_VERSION_PACKAGE internal/info). The external linker
// flags leave go-nvml's calls into libnvidia-ml unresolved at link time (go-nvml pkg/nvml/nvml.go
// repeats them in its #cgo LDFLAGS), for the library that nvml.Init dlopens to supply. The binaries
// bind those symbols lazily (readelf -d shows no BIND_NOW nor FLAGS_1 NOW with Go 1.26 and Debian's
// gcc), so they start, and answer --version, without libnvidia-ml: TestDevicePluginStartsWithoutNVML
// checks it. A binary that also linked Go's plugin package would be bound at start (the Go linker
// passes -Wl,-z,now when the program can use plugins, cmd/link/internal/ld/lib.go@go1.26.8, hostlink;
// see package migmanager's doc) and exit before main on an unresolved NVML symbol; these do not link
// it. Should a toolchain bind them at start after all, -Wl,-z,lazy at the end of -extldflags (which
// follow the Go linker's own flags, and the last -z of ld's wins) is the fix.
func devicePluginLDFlags() string {
	const info = "github.com/NVIDIA/k8s-device-plugin/internal/info"
	return strings.Join([]string{
		"-s", "-w",
		"'-extldflags=-Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files'",
		"-X", info + ".gitCommit=" + devicePluginCommit,
		"-X", info + ".version=" + DevicePluginVersion,
	}, " ")
}

func devicePluginModule() toolModule {
	const mod = "github.com/NVIDIA/k8s-device-plugin/cmd/"
	return toolModule{
		name: "deviceplugin", subdir: "deviceplugin", version: DevicePluginVersion,
		packages: []string{mod + "nvidia-device-plugin", mod + "gpu-feature-discovery", mod + "config-manager", mod + "mps-control-daemon"},
		ldflags:  devicePluginLDFlags(),
		expect:   "about 2 minutes",
	}
}

// EnsureDevicePlugin builds nvidia-device-plugin, gpu-feature-discovery, config-manager and
// mps-control-daemon once per cache (e2e/tools/deviceplugin) and returns where they are. Like
// EnsureNFD it waits on the cache's lock.
//
// The programs link go-nvml, which is cgo. The tool cache's builds take CGO_ENABLED from the
// environment, which is 1 wherever the Go command finds a C compiler; EnsureDevicePlugin refuses
// early, and says why, where it is 0, rather than fail on a build without go-nvml's cgo files.
func EnsureDevicePlugin(ctx context.Context, cacheDir string, progress io.Writer) (*DevicePlugin, error) {
	src, err := ToolsSourceDir()
	if err != nil {
		return nil, err
	}
	cgo, err := goCommandOutput(ctx, filepath.Join(src, "deviceplugin"), "env", "CGO_ENABLED")
	if err != nil {
		return nil, err
	}
	if cgo != "1" {
		return nil, fmt.Errorf("NVIDIA's device plugin %s links go-nvml, which needs cgo: go env CGO_ENABLED is %q (install a C compiler, or unset CGO_ENABLED=0)", DevicePluginVersion, cgo)
	}
	dir, err := ensureModule(ctx, cacheDir, progress, devicePluginModule())
	if err != nil {
		return nil, err
	}
	return &DevicePlugin{
		Plugin:           filepath.Join(dir, "nvidia-device-plugin"),
		GFD:              filepath.Join(dir, "gpu-feature-discovery"),
		ConfigManager:    filepath.Join(dir, "config-manager"),
		MPSControlDaemon: filepath.Join(dir, "mps-control-daemon"),
	}, nil
}
