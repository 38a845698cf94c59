package nfd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
	"github.com/gpuctl/gpuctl/e2e/sandbox/toolchain"
)

// workerPod is shaped like the worker DaemonSet of gpuctl's NFD chart (charts/node-feature-discovery).
func workerPod() (*corev1.Pod, *corev1.Container) {
	hp := func(name, path string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}
	}
	p := &corev1.Pod{Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{hp("host-sys", "/sys"), hp("host-os-release", "/etc/os-release"), hp("host-swaps", "/proc/swaps"),
			hp("features-d", "/etc/kubernetes/node-feature-discovery/features.d"),
			{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}}},
		Containers: []corev1.Container{{Name: "worker", Command: []string{"nfd-worker"}, VolumeMounts: []corev1.VolumeMount{
			{Name: "host-sys", MountPath: "/host-sys"}, {Name: "host-os-release", MountPath: "/host-etc/os-release"},
			{Name: "host-swaps", MountPath: "/host-proc/swaps"}, {Name: "features-d", MountPath: "/etc/kubernetes/node-feature-discovery/features.d/"},
			{Name: "conf", MountPath: "/etc/kubernetes/node-feature-discovery"},
		}}},
	}}
	return p, &p.Spec.Containers[0]
}

func TestHostMountsFollowTheDaemonSet(t *testing.T) {
	tree := t.TempDir()
	if err := writeTree(tree, standin.Hardware{GPUs: 1, GPUProduct: standin.GPUT4}, "6.1.0"); err != nil {
		t.Fatal(err)
	}
	p, c := workerPod()
	got := map[string]mount{}
	for _, m := range hostMounts(p, c, tree) {
		got[m.target] = m
	}
	want := map[string]mount{
		toolchain.NFDHostRoot + "/host-sys":            {source: filepath.Join(tree, "sys"), target: toolchain.NFDHostRoot + "/host-sys"},
		toolchain.NFDHostRoot + "/host-etc/os-release": {source: filepath.Join(tree, "etc/os-release"), target: toolchain.NFDHostRoot + "/host-etc/os-release", file: true},
		toolchain.NFDHostRoot + "/host-proc/swaps":     {source: filepath.Join(tree, "proc/swaps"), target: toolchain.NFDHostRoot + "/host-proc/swaps", file: true},
	}
	if len(got) != len(want) {
		t.Errorf("mounts %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("mount at %s: %+v, want %+v", k, got[k], w)
		}
	}
}

// The worker's view, as the sandbox sets it up: its node's tree at the host prefix and its node's
// kernel release; the machine's own paths are untouched.
func TestNamespaceWrapShowsTheNodeToTheWorkerOnly(t *testing.T) {
	mountCmd, err := Probe()
	if err != nil {
		t.Skipf("no private mount namespace here: %v", err)
	}
	tree := t.TempDir()
	if err := writeTree(tree, standin.Hardware{GPUs: 1, GPUProduct: standin.GPUT4, OSReleaseID: "rhel"}, "5.14.0-sandbox"); err != nil {
		t.Fatal(err)
	}
	p, c := workerPod()
	script := `cat ` + kernelRelease + ` "$1"/host-etc/os-release; cat "$1"/host-sys/bus/pci/devices/0000:10:00.0/vendor`
	bin, args, unshare := namespaceWrap(mountCmd, hostMounts(p, c, tree), tree, "/bin/sh", "-c", script, "sh", toolchain.NFDHostRoot)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: unshare}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{"5.14.0-sandbox", `ID="rhel"`, "0x10de"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the worker sees %q, want %s in it", out, want)
		}
	}
	if entries, _ := os.ReadDir(toolchain.NFDHostRoot); len(entries) != 0 {
		t.Errorf("%s on the machine is not empty: %v", toolchain.NFDHostRoot, entries)
	}
	if b, _ := os.ReadFile(kernelRelease); strings.Contains(string(b), "sandbox") {
		t.Errorf("the machine's kernel release changed: %s", b)
	}
}
