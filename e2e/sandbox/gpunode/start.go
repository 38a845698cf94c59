package gpunode

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox/controlplane"
	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml"
	"github.com/gpuctl/gpuctl/e2e/sandbox/podrun"
	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
)

// start runs p's program as the pod would: its environment (with the paths of its volumes mapped to
// local directories), the config NVIDIA's config-manager picks, its service account's token, over
// its node's mock NVML; the plugin in its own mount namespace, registering with its node's kubelet
// device manager.
func (r *Runner) start(ctx context.Context, p *corev1.Pod) (*controlplane.Process, error) {
	c, prog := container(p)
	node := p.Spec.NodeName
	dir := filepath.Join(r.cfg.Dir, "gpunode", p.Namespace+"-"+p.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	driverRoot, nvmlConfig, err := r.writeNode(node)
	if err != nil {
		return nil, fmt.Errorf("mock NVML of node %s: %w", node, err)
	}
	kubeconfig, err := podrun.Kubeconfig(ctx, r.cfg.Kube, p, func(name, token string) (string, error) {
		return r.cfg.Kubeconfig("gpunode-"+name, token)
	})
	if err != nil {
		return nil, err
	}
	mounts, err := r.volumes(ctx, p, dir)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(r.cfg.Dir, "gpunode-"+p.Name+".log")
	extra := []string{
		"KUBECONFIG=" + kubeconfig,
		mocknvml.ConfigEnv + "=" + nvmlConfig,
		// Where the plugin and GFD find libnvidia-ml.so.1 (cmd/nvidia-device-plugin/root.go at v0.19.0,
		// tryResolveLibrary) and GFD's dlopen of it.
		"CONTAINER_DRIVER_ROOT=" + driverRoot,
		"NVIDIA_DRIVER_ROOT=/",
		"LD_LIBRARY_PATH=" + filepath.Join(driverRoot, "usr/lib64"),
		"PATH=" + filepath.Join(driverRoot, "usr/bin") + ":" + os.Getenv("PATH"),
	}
	if err := r.pickConfig(ctx, p, mounts, extra, logPath); err != nil {
		return nil, err
	}
	env := append(mapPaths(podrun.Env(p, c), mountsOf(c, mounts)), extra...)
	bin, args, unshare := r.cfg.Build.GFD, programArgs(c, prog), uintptr(0)
	if prog == pluginProgram {
		sockDir, err := r.ensureKubelet(node)
		if err != nil {
			return nil, err
		}
		cdiDir := filepath.Join(r.nodeDir(node), "cdi")
		if err := os.MkdirAll(cdiDir, 0o755); err != nil {
			return nil, err
		}
		bin, args, unshare = namespaceWrap(r.cfg.Mount, sockDir, cdiDir, filepath.Join(r.nodeDir(node), "mig-minors"), append([]string{r.cfg.Build.Plugin}, args...)...)
	}
	podrun.Note(logPath, "===== %s: running %s %s (built from github.com/NVIDIA/k8s-device-plugin) for pod %s/%s (image %s) over node %s's mock NVML (%s)",
		time.Now().Format(time.RFC3339), prog, toolchain.DevicePluginVersion, p.Namespace, p.Name, c.Image, node, nvmlConfig)
	r.cfg.Logf("gpunode: running %s %s for pod %s/%s (image %s) on node %s", prog, toolchain.DevicePluginVersion, p.Namespace, p.Name, c.Image, node)
	return r.cfg.Spawner.Start(prog, bin, args, env, dir, logPath, unshare)
}

// programArgs are the container's arguments to the program: none for the operator's plugin container,
// which runs a shell script that execs it without any.
func programArgs(c *corev1.Container, prog string) []string {
	cmd := slices.Concat(c.Command, c.Args)
	if len(cmd) == 0 || path.Base(cmd[0]) != prog {
		return nil
	}
	return cmd[1:]
}

// writeNode writes node's mock NVML config (its GPUs, their MIG state now) and its driver root, where
// libnvidia-ml.so.1 is the mock.
func (r *Runner) writeNode(node string) (driverRoot, config string, err error) {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	dir := r.nodeDir(node)
	layout := r.cfg.MIG.Layout(node)
	cfg, err := nvmlConfig(node, r.cfg.Hardware[node], layout)
	if err != nil {
		return "", "", err
	}
	r.mu.Lock()
	r.shown[node] = shows(r.cfg.Hardware[node].GPUs, layout)
	r.mu.Unlock()
	config = filepath.Join(dir, "nvml.json")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	if err := cfg.Write(config); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "mig-minors"), []byte(migMinors(len(cfg.GPUs))), 0o644); err != nil {
		return "", "", err
	}
	driverRoot = filepath.Join(dir, "driver-root")
	return driverRoot, config, writeDriverRoot(driverRoot, r.cfg.MockNVML, cfg.DriverVersion)
}

// writeDriverRoot lays out a driver's user-space libraries as NVIDIA's driver installs them, which
// the plugin's CDI spec generation looks for (nvidia-container-toolkit pkg/nvcdi/driver-nvml.go at
// v1.19.0 locates libcuda.so.<driver version>, resolves its links and checks the file's name ends in
// that version): libnvidia-ml.so.<version>, the mock, with its soname link libnvidia-ml.so.1, and
// libcuda.so.<version> with libcuda.so.1. The versioned files are the mock library itself (a hard
// link or a copy, not a link to the tool cache's file, whose name has no version). CUDA is never
// called in the sandbox.
func writeDriverRoot(driverRoot, mockNVML, version string) error {
	lib := filepath.Join(driverRoot, "usr/lib64")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		return err
	}
	if err := writeMPSControl(filepath.Join(driverRoot, "usr/bin")); err != nil {
		return err
	}
	for _, name := range []string{"libnvidia-ml.so.", "libcuda.so."} {
		if err := sameFile(mockNVML, filepath.Join(lib, name+version)); err != nil {
			return err
		}
		link := filepath.Join(lib, name+"1")
		_ = os.Remove(link)
		if err := os.Symlink(name+version, link); err != nil {
			return err
		}
	}
	return nil
}

// mpsControl STANDS IN for the driver's nvidia-cuda-mps-control, a driver binary no Go module
// serves. NVIDIA's plugin, sharing GPUs with MPS, checks its resource's MPS daemon by piping
// get_default_active_thread_percentage to it and failing on a non-zero exit
// (cmd/mps-control-daemon/mps/daemon.go at v0.19.0, AssertHealthy); a daemon that runs answers with
// the percentage. The sandbox runs no MPS daemon (its pods run nothing): this answers as one would.
const mpsControl = `#!/bin/sh
# gpuctl sandbox: stands in for the driver's nvidia-cuda-mps-control (see package gpunode).
read -r cmd
case "$cmd" in
get_default_active_thread_percentage) echo 100.0 ;;
esac
`

func writeMPSControl(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "nvidia-cuda-mps-control"), []byte(mpsControl), 0o755)
}

// sameFile makes dst a hard link to src, or a copy where they are on different file systems.
func sameFile(src, dst string) error {
	_ = os.Remove(dst)
	if os.Link(src, dst) == nil {
		return nil
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

// namespaceWrap returns the command that runs argv in a new mount namespace (the unshare flags for
// controlplane.Spawner) where
//   - the node's device-plugins directory is /var/lib/kubelet/device-plugins, the directory NVIDIA's
//     plugin serves its sockets in and finds kubelet.sock in (k8s.io/kubelet
//     pkg/apis/deviceplugin/v1beta1 DevicePluginPath; cmd/nvidia-device-plugin and internal/plugin
//     at v0.19.0 use it);
//   - the node's CDI directory is /var/run/cdi, where the plugin writes the CDI specs of its devices
//     (the DaemonSet's cdi-root hostPath);
//   - the driver's MIG capability minors file is /proc/driver/nvidia-caps/mig-minors, which the
//     plugin reads for a MIG device's capability device nodes (internal/mig/mig-dp.go at v0.19.0).
//
// tmpfs mounts over /var/lib, /run and /proc/driver in that namespace carry the mount points, so nothing
// is created on the machine's /.
func namespaceWrap(mountCmd, sockDir, cdiDir, migMinors string, argv ...string) (bin string, args []string, unshare uintptr) {
	q := podrun.ShellQuote
	const dp = "/var/lib/kubelet/device-plugins"
	var s strings.Builder
	s.WriteString("set -e\n")
	fmt.Fprintf(&s, "%s -t tmpfs -o mode=0755,size=1m gpunode /var/lib\n", q(mountCmd))
	fmt.Fprintf(&s, "mkdir -p %s\n", dp)
	fmt.Fprintf(&s, "%s --bind %s %s\n", q(mountCmd), q(sockDir), dp)
	fmt.Fprintf(&s, "%s -t tmpfs -o mode=0755,size=1m gpunode /run\n", q(mountCmd))
	s.WriteString("mkdir -p /run/cdi\n")
	fmt.Fprintf(&s, "%s --bind %s /run/cdi\n", q(mountCmd), q(cdiDir))
	fmt.Fprintf(&s, "%s -t tmpfs -o mode=0755,size=1m gpunode /proc/driver\n", q(mountCmd))
	s.WriteString("mkdir -p /proc/driver/nvidia-caps\n")
	fmt.Fprintf(&s, "cp %s /proc/driver/nvidia-caps/mig-minors\n", q(migMinors))
	s.WriteString(`exec "$@"` + "\n")
	return "/bin/sh", append([]string{"-c", s.String(), pluginProgram}, argv...), syscall.CLONE_NEWNS
}
