package nfd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox/podrun"
	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
)

// kernelRelease is where NFD's kernel source reads the kernel's release, without the host prefix
// (source/kernel/version.go at v0.19.0).
const kernelRelease = "/proc/sys/kernel/osrelease"

// mounts says where a worker pod's hostPath volumes go: the node's tree at tree+hostPath, seen by the
// worker at NFDHostRoot+mountPath (NFD's image reads /host-sys where the DaemonSet mounts the node's
// /sys; the sandbox's build reads NFDHostRoot/host-sys). Only mounts under "/host-", the prefix NFD's
// image is linked with, are NFD's host paths; a source missing from the tree is left out, as the
// worker then finds nothing there.
type mount struct {
	source, target string
	file           bool
}

func hostMounts(pod *corev1.Pod, c *corev1.Container, tree string) []mount {
	hostPaths := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	var out []mount
	for _, vm := range c.VolumeMounts {
		hp, ok := hostPaths[vm.Name]
		if !ok || !strings.HasPrefix(vm.MountPath, "/host-") {
			continue
		}
		src := filepath.Join(tree, hp)
		fi, err := os.Stat(src)
		if err != nil {
			continue
		}
		out = append(out, mount{source: src, target: toolchain.NFDHostRoot + vm.MountPath, file: !fi.IsDir()})
	}
	return out
}

// namespaceWrap returns the command that runs argv in a new mount namespace (the unshare flags for
// controlplane.Spawner; Go makes the namespace's mounts private before exec) after a small shell has
// put a tmpfs on NFDHostRoot, bind-mounted the node's tree read-only on the pod's host mounts below
// it, and the node's kernel release over /proc/sys/kernel/osrelease; it then execs argv, which keeps
// the shell's PID, process group and PDEATHSIG. The machine's / is not written to: the mount points
// live in the tmpfs, which only the worker's namespace sees.
func namespaceWrap(mountCmd string, mounts []mount, tree string, argv ...string) (bin string, args []string, unshare uintptr) {
	q := podrun.ShellQuote
	var s strings.Builder
	s.WriteString("set -e\n")
	fmt.Fprintf(&s, "%s -t tmpfs -o mode=0755,size=1m nfd-host %s\n", q(mountCmd), q(toolchain.NFDHostRoot))
	for _, m := range mounts {
		if m.file {
			fmt.Fprintf(&s, "mkdir -p %s && : > %s\n", q(filepath.Dir(m.target)), q(m.target))
		} else {
			fmt.Fprintf(&s, "mkdir -p %s\n", q(m.target))
		}
		fmt.Fprintf(&s, "%s --bind -o ro %s %s\n", q(mountCmd), q(m.source), q(m.target))
	}
	fmt.Fprintf(&s, "%s --bind -o ro %s %s\n", q(mountCmd), q(filepath.Join(tree, kernelRelease)), kernelRelease)
	s.WriteString(`exec "$@"` + "\n")
	return "/bin/sh", append([]string{"-c", s.String(), "nfd-worker"}, argv...), syscall.CLONE_NEWNS
}

// Probe reports whether nfd-workers can get their own mount namespace here (root, mount(8), a bind
// mount in a new namespace), and why not. Without it the sandbox keeps the NFD stand-in.
func Probe() (mountCmd string, err error) {
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("not root")
	}
	mountCmd, err = exec.LookPath("mount")
	if err != nil {
		return "", fmt.Errorf("no mount command: %w", err)
	}
	if err := os.MkdirAll(toolchain.NFDHostRoot, 0o755); err != nil {
		return "", err
	}
	tree, err := os.MkdirTemp("", "nfd-probe-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tree)
	if err := os.MkdirAll(filepath.Join(tree, "proc/sys/kernel"), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tree, kernelRelease), []byte("1.2.3-probe\n"), 0o644); err != nil {
		return "", err
	}
	m := []mount{{source: tree, target: toolchain.NFDHostRoot + "/host-probe"}}
	bin, args, unshare := namespaceWrap(mountCmd, m, tree, "/bin/sh", "-c", `grep -q probe `+kernelRelease)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: unshare}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mounts in a new mount namespace failed: %v %s", err, strings.TrimSpace(string(out)))
	}
	return mountCmd, nil
}
