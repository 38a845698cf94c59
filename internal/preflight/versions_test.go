package preflight

import (
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/detect"
)

func TestKubernetesVersion(t *testing.T) {
	tests := []struct {
		name, version string
		status        Status
		msg           string
	}{
		{"a version in the tested range passes", "v1.34.2", StatusPass, "1.34"},
		{"a provider's suffix is ignored", "v1.33.4-gke.1172000", StatusPass, "1.33"},
		{"the sandbox's v1.37.2, newer than tested, is only a warning", "v1.37.2", StatusWarn, "newer"},
		{"a version below the minimum fails", "v1.29.4", StatusFail, "older"},
		{"an unreadable version is a warning", "banana", StatusWarn, "cannot read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv()
			env.Detection.KubernetesVersion = tc.version
			expect(t, run(t, "kubernetes-version", env), tc.status, tc.msg, "")
		})
	}
}

func TestKubeletVersions(t *testing.T) {
	t.Run("nodes older than supported fail even when the API server is newer", func(t *testing.T) {
		env := testEnv()
		env.Detection.KubernetesVersion = "v1.37.2"
		env.Detection.KubeletVersions = []string{"v1.29.4"}
		env.Detection.Pools[2].KubeletVersions = []string{"v1.29.4"}
		r := run(t, "kubernetes-version", env)
		expect(t, r, StatusFail, "kubelet v1.29.4 on pool worker-gpu: Kubernetes 1.29 is older", "upgrade the cluster")
		if !strings.Contains(r.Message, "API server v1.37.2: Kubernetes 1.37 is newer") {
			t.Errorf("the API server's warning is lost: %s", r.Message)
		}
	})
	t.Run("kubelets at the API server's version add nothing", func(t *testing.T) {
		env := testEnv()
		env.Detection.KubeletVersions = []string{env.Detection.KubernetesVersion, "v1.34.1"}
		r := run(t, "kubernetes-version", env)
		expect(t, r, StatusPass, "1.34", "")
		if strings.Contains(r.Message, "kubelet") {
			t.Errorf("message %q", r.Message)
		}
	})
	t.Run("without any version it warns", func(t *testing.T) {
		env := testEnv()
		env.Detection.KubernetesVersion = ""
		expect(t, run(t, "kubernetes-version", env), StatusWarn, "reported a version", "")
	})
}

func TestOpenShiftVersion(t *testing.T) {
	t.Run("does not apply off OpenShift", func(t *testing.T) {
		expect(t, run(t, "openshift-version", testEnv()), StatusSkip, "not OpenShift", "")
	})
	for _, tc := range []struct {
		name, version string
		status        Status
	}{
		{"a tested OpenShift passes", "4.19.9", StatusPass},
		{"an OpenShift older than supported fails", "4.12.3", StatusFail},
		{"an OpenShift newer than tested warns", "4.30.0", StatusWarn},
		{"an unknown OpenShift version warns", "", StatusWarn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv()
			env.Detection.Distribution = detect.Candidate{Name: "openshift", Version: tc.version}
			expect(t, run(t, "openshift-version", env), tc.status, "", "")
		})
	}
}

func TestContainerdVersion(t *testing.T) {
	withRuntimes := func(rts ...string) *Env {
		env := testEnv()
		env.Detection.GPUNodes = nil
		for i, rt := range rts {
			n := gpuNode("gpu-"+string(rune('a'+i)), "worker-gpu")
			n.Runtime = rt
			env.Detection.GPUNodes = append(env.Detection.GPUNodes, n)
		}
		return env
	}
	t.Run("GPU nodes on a supported containerd pass, counted per version", func(t *testing.T) {
		expect(t, run(t, "containerd-version", withRuntimes("containerd://2.1.4", "containerd://2.1.4")), StatusPass, "containerd://2.1.4 on 2 GPU nodes", "")
	})
	t.Run("one GPU node on a containerd older than supported fails", func(t *testing.T) {
		r := run(t, "containerd-version", withRuntimes("containerd://2.1.4", "containerd://1.6.20"))
		expect(t, r, StatusFail, "containerd://1.6.20 on 1 GPU node", "CDI, which the operator uses by default since v25.10, needs containerd 1.7 or newer (canonical/k8s-snap#2388)")
	})
	t.Run("a containerd newer than tested warns", func(t *testing.T) {
		expect(t, run(t, "containerd-version", withRuntimes("containerd://2.9.0")), StatusWarn, "newer", "")
	})
	t.Run("Docker on a GPU node fails", func(t *testing.T) {
		expect(t, run(t, "containerd-version", withRuntimes("docker://28.1.1")), StatusFail, "Docker", "")
	})
	t.Run("before GPU nodes are known, workers are judged and an old runtime only warns", func(t *testing.T) {
		env := testEnv()
		env.Detection.GPUNodes = nil
		env.Detection.Pools[1].Runtimes = []string{"containerd://1.6.20"}
		expect(t, run(t, "containerd-version", env), StatusWarn, "containerd://1.6.20 on worker nodes", "")
	})
}

func TestBeforeCDI(t *testing.T) {
	for rt, want := range map[string]bool{
		"containerd://1.6.20": true, "containerd://1.5.0": true, "containerd://1.7.27": false, "containerd://1.10.0": false,
		"containerd://2.1.4-k3s1": false, "cri-o://1.31.4": false, "docker://28.1.1": false,
	} {
		if got := beforeCDI(rt); got != want {
			t.Errorf("beforeCDI(%q) = %v, want %v", rt, got, want)
		}
	}
}
