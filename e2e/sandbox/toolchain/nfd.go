package toolchain

import (
	"context"
	"io"
	"path/filepath"
)

// NFDVersion is Node Feature Discovery (sigs.k8s.io/node-feature-discovery), pinned by
// e2e/tools/nfd/go.mod: the version gpuctl's NFD chart ships (charts/node-feature-discovery).
const NFDVersion = "v0.19.0"

// NFDHostRoot is the directory under which the sandbox's NFD programs read a node's host paths. NFD
// reads /sys, /proc, /etc, /usr, /lib, /boot and /var of the node through pkg/utils/hostpath, whose
// prefix its image sets at link time to "/host-" (NFD v0.19.0 Dockerfile, HOSTMOUNT_PREFIX), where the
// worker DaemonSet mounts the node's directories (/host-sys, /host-etc/os-release, …). The sandbox
// links with NFDHostRoot+"/host-" instead, so that each nfd-worker, in its own mount namespace, sees
// its node's tree at NFDHostRoot+<the pod's mountPath> without anything created at the machine's /.
const NFDHostRoot = "/opt/nfd-host"

// NFDHostPrefix is the prefix linked into the sandbox's NFD programs (hostpath.pathPrefix).
const NFDHostPrefix = NFDHostRoot + "/host-"

// NFD are Node Feature Discovery's programs in the tool cache.
type NFD struct {
	// Master, Worker and GC are absolute paths of nfd-master, nfd-worker and nfd-gc.
	Master, Worker, GC string
}

func nfdModule() toolModule {
	const mod = "sigs.k8s.io/node-feature-discovery"
	return toolModule{
		name: "nfd", subdir: "nfd", version: NFDVersion,
		packages: []string{mod + "/cmd/nfd-master", mod + "/cmd/nfd-worker", mod + "/cmd/nfd-gc"},
		// As NFD's Makefile and Dockerfile link them (v0.19.0), with the sandbox's host prefix.
		ldflags: "-X " + mod + "/pkg/version.version=" + NFDVersion + " -X " + mod + "/pkg/utils/hostpath.pathPrefix=" + NFDHostPrefix,
		expect:  "about 8 minutes",
	}
}

// EnsureNFD builds nfd-master, nfd-worker and nfd-gc once per cache (e2e/tools/nfd) and returns where
// they are. Like EnsureFlux it waits on the cache's lock; `sandbox tools` builds them ahead of the
// tests.
func EnsureNFD(ctx context.Context, cacheDir string, progress io.Writer) (*NFD, error) {
	dir, err := ensureModule(ctx, cacheDir, progress, nfdModule())
	if err != nil {
		return nil, err
	}
	return &NFD{
		Master: filepath.Join(dir, "nfd-master"),
		Worker: filepath.Join(dir, "nfd-worker"),
		GC:     filepath.Join(dir, "nfd-gc"),
	}, nil
}
