package operator

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
)

// FilesPath is where the GPU operator controller reads its state manifests: the path is
// compiled in (controllers/state_manager.go and internal/state/manager.go at v26.7.0), and each
// release carries different files there.
const FilesPath = "/opt/gpu-operator"

// operatorView is how a controller process sees its release's files at FilesPath.
//
// Preferred: each process gets a private mount namespace (CLONE_NEWNS, which Go makes private to
// propagation before exec) in which a read-only bind mount of its release's files covers
// /opt/gpu-operator; a small shell mounts and then execs the controller, so the controller keeps the
// process's PID, process group and PDEATHSIG (controlplane.Spawner). Parallel sandboxes running different
// releases each see their own files. Without the rights for that (not root), the fallback copies the
// files to the shared /opt/gpu-operator, which only works while every sandbox on the machine runs the
// same release.
type operatorView struct {
	private bool
	mount   string // mount(8)
	warning string // why the view is not private
}

// chooseOperatorView finds out once whether private mounts work here, by trying one with b's files.
func chooseOperatorView(b toolchain.OperatorBuild) operatorView {
	shared := func(why string) operatorView {
		return operatorView{warning: fmt.Sprintf("controller processes cannot get a private %s (%s): the sandbox copies each release's files to the shared %s instead, so parallel sandboxes must run the same GPU operator release",
			FilesPath, why, FilesPath)}
	}
	if os.Geteuid() != 0 {
		return shared("not root")
	}
	mount, err := exec.LookPath("mount")
	if err != nil {
		return shared("no mount command: " + err.Error())
	}
	if err := os.MkdirAll(FilesPath, 0o755); err != nil {
		return shared(err.Error())
	}
	v := operatorView{private: true, mount: mount}
	bin, args, unshare := v.wrap(b.Root, "/bin/sh", "-c", `test -f "$1"`, "probe", filepath.Join(FilesPath, toolchain.ReleaseMarker))
	probe := exec.Command(bin, args...)
	probe.SysProcAttr = &syscall.SysProcAttr{Unshareflags: unshare}
	if out, err := probe.CombinedOutput(); err != nil {
		return shared(fmt.Sprintf("a bind mount in a new mount namespace failed: %v %s", err, strings.TrimSpace(string(out))))
	}
	return v
}

// wrap returns the command that runs argv with root mounted at /opt/gpu-operator: run bin with args
// in a process started with the unshare flags. The shell execs argv, which keeps its PID.
func (v operatorView) wrap(root string, argv ...string) (bin string, args []string, unshare uintptr) {
	const script = `mount=$1 root=$2; shift 2; "$mount" --bind -o ro "$root" ` + FilesPath + ` || exit 125; exec "$@"`
	return "/bin/sh", append([]string{"-c", script, "gpu-operator", v.mount, root}, argv...), syscall.CLONE_NEWNS
}
