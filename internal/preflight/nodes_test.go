package preflight

import (
	"testing"

	"github.com/gpuctl/gpuctl/internal/detect"
)

func TestGPUNodes(t *testing.T) {
	t.Run("found GPU nodes pass and are named", func(t *testing.T) {
		expect(t, run(t, "gpu-nodes", testEnv()), StatusPass, "1 GPU node: gpu-1", "")
	})
	t.Run("no GPU node yet is a warning: NFD may find them", func(t *testing.T) {
		env := testEnv()
		env.Detection.GPUNodes = nil
		expect(t, run(t, "gpu-nodes", env), StatusWarn, "none of the 3 nodes", "NFD will label them")
	})
	t.Run("many GPU nodes are listed briefly", func(t *testing.T) {
		env := testEnv()
		env.Detection.GPUNodes = nil
		for _, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
			env.Detection.GPUNodes = append(env.Detection.GPUNodes, gpuNode(n, "worker-gpu"))
		}
		expect(t, run(t, "gpu-nodes", env), StatusPass, "7 GPU nodes: a, b, c, d, e and 2 more", "")
	})
}

func TestHostDriver(t *testing.T) {
	const preinstalled = "label nvidia.com/gpu.deploy.driver=pre-installed"
	withDrivers := func(driverOff bool, drivers ...string) *Env {
		env := testEnv()
		env.Detection.GPUNodes = nil
		for i, d := range drivers {
			n := gpuNode("gpu-"+string(rune('a'+i)), "worker-gpu")
			n.HostDriver = d
			env.Detection.GPUNodes = append(env.Detection.GPUNodes, n)
		}
		if driverOff {
			env.Plan = testPlan(map[string]any{"driver": map[string]any{"enabled": false}}, false)
		}
		return env
	}
	tests := []struct {
		name   string
		env    *Env
		status Status
		msg    string
	}{
		{"no host driver passes", withDrivers(false, ""), StatusPass, "driver container installs it"},
		{"host drivers everywhere with the driver off pass", withDrivers(true, preinstalled, preinstalled), StatusPass, "every GPU node has a host driver"},
		{"host drivers everywhere with the driver forced on warn", withDrivers(false, preinstalled), StatusWarn, "driver.enabled=true"},
		{"host drivers on some nodes warn", withDrivers(false, preinstalled, ""), StatusWarn, "1 of 2 GPU nodes have a host driver (gpu-a"},
		{"the driver off with nodes lacking one warns", withDrivers(true, preinstalled, ""), StatusWarn, "only 1 of 2 GPU nodes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, run(t, "host-driver", tc.env), tc.status, tc.msg, "")
		})
	}
	t.Run("without a plan it does not run", func(t *testing.T) {
		env := testEnv()
		env.Plan = nil
		expect(t, run(t, "host-driver", env), StatusSkip, "install plan", "")
	})
}

func TestDriverOS(t *testing.T) {
	onOS := func(os string, driverOff bool) *Env {
		env := testEnv()
		env.Detection.Pools[2].OS = os
		if driverOff {
			env.Plan = testPlan(map[string]any{"driver": map[string]any{"enabled": false}}, false)
		}
		return env
	}
	tests := []struct {
		name   string
		env    *Env
		status Status
		msg    string
		hint   string
	}{
		{"Ubuntu passes", onOS("ubuntu", false), StatusPass, "no GPU node", ""},
		{"COS with the driver on fails", onOS("cos", false), StatusFail, "Container-Optimized OS on gpu-1", "gke profile"},
		{"Bottlerocket with the driver on fails", onOS("bottlerocket", false), StatusFail, "Bottlerocket on gpu-1", "toolkit.enabled=false"},
		{"Amazon Linux with the driver on fails", onOS("amzn", false), StatusFail, "Amazon Linux on gpu-1", "Ubuntu EKS AMIs"},
		{"COS with the driver off passes", onOS("cos", true), StatusPass, "driver.enabled=false", ""},
		{"a driver.enabled given as a string is read", func() *Env {
			env := onOS("cos", false)
			env.Plan = testPlan(map[string]any{"driver": map[string]any{"enabled": "false"}}, false)
			return env
		}(), StatusPass, "driver.enabled=false", ""},
		{"before GPU nodes are known, a COS worker pool only warns", func() *Env {
			env := onOS("ubuntu", false)
			env.Detection.GPUNodes = nil
			env.Detection.Pools[1].OS = "cos"
			return env
		}(), StatusWarn, "if these become GPU nodes", "gke profile"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, run(t, "driver-os", tc.env), tc.status, tc.msg, tc.hint)
		})
	}
}

func TestAutopilot(t *testing.T) {
	t.Run("does not apply off GKE", func(t *testing.T) {
		expect(t, run(t, "autopilot", testEnv()), StatusSkip, "not GKE", "")
	})
	t.Run("GKE Standard passes", func(t *testing.T) {
		env := testEnv()
		env.Detection.Distribution.Name = "gke"
		expect(t, run(t, "autopilot", env), StatusPass, "Standard", "")
	})
	t.Run("Autopilot fails", func(t *testing.T) {
		env := testEnv()
		env.Detection.Distribution.Name = "gke"
		env.Detection.Autopilot = &detect.Finding{Detected: true}
		expect(t, run(t, "autopilot", env), StatusFail, "Autopilot", "GKE Standard cluster")
	})
}
