package e2e

import (
	"context"
	"encoding/json"
	"net"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/driverimage"
	"github.com/gpuctl/gpuctl/internal/preflight"
)

// TestPrecompiledDriverPerKernel: three GPU nodes on two kernels, which show their GPUs (an NFD has
// labelled them), and a registry (the sandbox's real
// OCI registry, as a --registry mirror) with NVIDIA's precompiled driver image for one kernel only.
// check --pre with driver.usePrecompiled=true names the node and kernel without an image, exits as a
// failed preflight and writes nothing; a registry that never answers is a warning, not a hang.
func TestPrecompiledDriverPerKernel(t *testing.T) {
	t.Parallel()
	c, generic, aws := twoKernels(t, true)
	// The mirror keeps NVIDIA's path: nvcr.io/nvidia/driver → MIRROR/nvidia/driver. It holds the
	// precompiled image for the generic kernel, another kernel's, and a compiled driver's tag.
	published := []string{
		driverimage.PrecompiledTag("595", generic.Kernel, "ubuntu24.04"),
		driverimage.PrecompiledTag("595", "5.15.0-153-generic", "ubuntu22.04"),
		"595.91.07-ubuntu24.04",
	}
	if err := c.PushImage(context.Background(), "nvidia/driver", published...); err != nil {
		t.Fatal(err)
	}
	repo := c.RegistryHost + "/nvidia/driver"
	if tags, err := (&driverimage.Registry{}).Tags(context.Background(), repo, nil); err != nil || len(tags) != len(published) {
		t.Fatalf("the sandbox registry lists %v, %v; want the %d tags pushed", tags, err, len(published))
	}

	t.Run("a kernel without a precompiled image fails preflight, naming node and kernel", func(t *testing.T) {
		before := clusterState(t, c)
		code, stdout, _ := gpuctl(t, c, "check", "--pre", "--set", "driver.usePrecompiled=true", "--set", "driver.version=595", "--registry", c.RegistryHost)
		t.Log(stdout)
		if code != cli.ExitPreflight {
			t.Errorf("exit %d, want %d (a failed preflight)", code, cli.ExitPreflight)
		}
		missing := "no precompiled driver " + repo + ":595-6.8.0-1017-aws-ubuntu24.04 for kernel 6.8.0-1017-aws (Ubuntu 24.04.2 LTS) on gpu-worker-3"
		if !strings.Contains(stdout, missing) {
			t.Errorf("output does not say %q", missing)
		}
		for _, n := range []string{"gpu-worker-1", "gpu-worker-2"} {
			if strings.Contains(stdout, "on "+n) && strings.Contains(stdout, "no precompiled driver "+repo+":595-6.8.0-60-generic") {
				t.Errorf("%s has its image, but is named as missing one", n)
			}
		}
		if !strings.Contains(stdout, "kernel 6.8.0-60-generic, Ubuntu 24.04.2 LTS, containerd://2.1.4: gpu-worker-1, gpu-worker-2") {
			t.Error("the nodes alike are not listed together with their kernel, OS image and runtime")
		}
		assertUnchanged(t, before, clusterState(t, c))
	})

	t.Run("install stops at the same check before its first write", func(t *testing.T) {
		before := clusterState(t, c)
		code, _, stderr := gpuctl(t, c, "install", "--set", "driver.usePrecompiled=true", "--set", "driver.version=595", "--registry", c.RegistryHost)
		if code != cli.ExitPreflight || !strings.Contains(stderr, "for kernel 6.8.0-1017-aws (Ubuntu 24.04.2 LTS) on gpu-worker-3") {
			t.Errorf("exit %d, want %d naming gpu-worker-3's kernel", code, cli.ExitPreflight)
		}
		assertUnchanged(t, before, clusterState(t, c))
	})

	t.Run("every kernel with an image passes", func(t *testing.T) {
		if err := c.PushImage(context.Background(), "nvidia/driver", driverimage.PrecompiledTag("595", aws.Kernel, "ubuntu24.04")); err != nil {
			t.Fatal(err)
		}
		code, stdout, _ := gpuctl(t, c, "check", "--pre", "-o", "json", "--set", "driver.usePrecompiled=true", "--set", "driver.version=595", "--registry", c.RegistryHost)
		r := reportResult(t, stdout, "precompiled-driver")
		if r.Status != preflight.StatusPass || !strings.Contains(r.Message, "gpu-worker-3") {
			t.Errorf("exit %d; precompiled-driver %s: %s", code, r.Status, r.Message)
		}
	})

	t.Run("a registry that never answers is a warning within the deadline", func(t *testing.T) {
		silent := silentRegistry(t)
		before := clusterState(t, c)
		// --timeout bounds the checks: the registry gets half of it, so its silence is reported as
		// a warning while the check still has time, not as an expired run.
		code, stdout, _ := gpuctl(t, c, "check", "--pre", "-o", "json", "--timeout", "12s", "--set", "driver.usePrecompiled=true", "--set", "driver.version=595", "--registry", silent)
		r := reportResult(t, stdout, "precompiled-driver")
		if r.Status != preflight.StatusWarn || !regexp.MustCompile(`no answer within [1-6]s`).MatchString(r.Message) {
			t.Errorf("precompiled-driver %s: %s; want a warning that the registry did not answer within half of --timeout", r.Status, r.Message)
		}
		if code != cli.ExitOK {
			t.Errorf("exit %d, want 0: an unreachable registry is a warning", code)
		}
		assertUnchanged(t, before, clusterState(t, c))
	})
}

// twoKernels starts a kubeadm sandbox with the sandbox's OCI registry and three GPU nodes that show
// their GPUs (an NFD has labelled them): gpu-worker-1 and -2 on Ubuntu's generic kernel, gpu-worker-3
// on its AWS kernel; noOperator leaves NVIDIA's controller out.
func twoKernels(t *testing.T, noOperator bool) (c *sandbox.Cluster, generic, aws sandbox.NodeOS) {
	t.Helper()
	generic, aws = sandbox.Ubuntu("24.04.2", "6.8.0-60-generic"), sandbox.Ubuntu("24.04.2", "6.8.0-1017-aws")
	c = sandbox.StartT(t, sandbox.Options{
		Scenario:   sandbox.Scenario{Distro: "kubeadm", GPUNodes: 3, CPUNodes: 1, NFDLabels: true, GPUNodeOS: []sandbox.NodeOS{generic, generic, aws}},
		NoOperator: noOperator,
		Registry:   true,
	})
	return c, generic, aws
}

// silentRegistry is a listener that accepts and says nothing (an air-gapped proxy, a firewall that
// drops), as a --registry address.
func silentRegistry(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, conn)
		}
	}()
	return l.Addr().String()
}

// reportResult decodes check --pre -o json and returns the result of the check with the given ID.
func reportResult(t *testing.T, stdout, id string) preflight.Result {
	t.Helper()
	var rep preflight.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("check --pre -o json: %v\n%s", err, stdout)
	}
	r := rep.Get(id)
	if r == nil {
		t.Fatalf("no %s check in the report:\n%s", id, stdout)
	}
	return *r
}
