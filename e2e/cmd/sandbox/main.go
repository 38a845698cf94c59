// Command sandbox runs gpuctl's local GPU cluster sandbox for people: a real Kubernetes control plane
// with kwok-simulated GPU nodes of a chosen distribution and the real NVIDIA GPU Operator controller.
//
//	go run ./e2e/cmd/sandbox up --distro gke [--gpu-nodes 2 --cpu-nodes 1] [--operator-version v26.3.3 | --no-operator] [--registry | --gitops flux] [--detach]
//	go run ./e2e/cmd/sandbox env      # prints export KUBECONFIG=…
//	go run ./e2e/cmd/sandbox down
//	go run ./e2e/cmd/sandbox tools    # build the programs into the cache (what `up` does first)
//
// `up` runs in the foreground until Ctrl-C (the stand-ins and the operator follower live in its
// process); with --detach it starts itself in the background, waits until the cluster is ready and
// returns. One sandbox per --name at a time.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/bundle"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(1)
	}
}

const usage = `usage: sandbox up [flags] | down | env | tools    (sandbox up -h for flags)`

// readyFDEnv names the file descriptor a detached `up` reports readiness on.
const readyFDEnv = "GPUCTL_SANDBOX_READY_FD"

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet("sandbox "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "default", "sandbox name (one state directory per name)")
	var s sandbox.Scenario
	var detach, noOperator, registry bool
	var operatorVersion, gitOps string
	if args[0] == "up" {
		fs.StringVar(&s.Distro, "distro", "gke", "distribution to simulate: "+strings.Join(sandbox.Distros(), ", "))
		fs.IntVar(&s.GPUNodes, "gpu-nodes", 2, "GPU worker nodes")
		fs.IntVar(&s.CPUNodes, "cpu-nodes", 1, "CPU-only worker nodes")
		fs.IntVar(&s.GPUsPerNode, "gpus-per-node", 1, "GPUs per GPU node")
		fs.BoolVar(&s.GPUControlPlane, "gpu-control-plane", false, "the control-plane node has the GPU and takes workloads (k3s, rke2): with --gpu-nodes 0 --cpu-nodes 0, a single-node box")
		fs.BoolVar(&s.NFDLabels, "nfd-labels", false, "GPU nodes already carry Node Feature Discovery labels")
		fs.BoolVar(&s.PreinstalledDriver, "preinstalled-driver", false, "GPU nodes have a host driver (nvidia.com/gpu.deploy.driver=pre-installed)")
		fs.BoolVar(&s.GKEDevicePlugin, "gke-device-plugin", false, "GKE's own device plugin runs on the GPU nodes (gke)")
		fs.BoolVar(&s.GKEAutopilot, "gke-autopilot", false, "simulate a GKE Autopilot cluster (gke)")
		fs.StringVar(&s.KubeletVersion, "kubelet-version", "", "Kubernetes version the nodes report, without the platform suffix (default: the control plane's)")
		fs.StringVar(&operatorVersion, "operator-version", bundle.Default().Version,
			"GPU operator release whose controller must be built ("+strings.Join(releases(), ", ")+"); the openshift catalog's default channel; "+
				"the follower runs the release the operator Deployment's image names, this one for an image it does not know")
		fs.BoolVar(&noOperator, "no-operator", false, "never run the real GPU operator controller (the operator follower is off)")
		fs.BoolVar(&registry, "registry", false, "run an OCI registry (plain HTTP, no auth) on a loopback port")
		fs.StringVar(&gitOps, "gitops", "", "run a GitOps controller: "+sandbox.GitOpsFlux+" (Flux's source-controller and helm-controller; implies --registry)")
		fs.BoolVar(&detach, "detach", false, "start in the background and return when ready")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	dir, err := stateDir(*name)
	if err != nil {
		return err
	}
	switch args[0] {
	case "up":
		if pid, ok := runningPID(dir); ok {
			return fmt.Errorf("sandbox %q is already running (pid %d); `sandbox env` prints its KUBECONFIG, `sandbox down` stops it", *name, pid)
		}
		if detach {
			return upDetached(dir, args[1:], stdout)
		}
		return up(dir, sandbox.Options{Scenario: s, OperatorVersion: operatorVersion, NoOperator: noOperator, Registry: registry, GitOps: gitOps}, stdout, stderr)
	case "down":
		return down(dir, *name, stderr)
	case "tools":
		t, err := sandbox.EnsureTools(context.Background(), "", stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "sandbox tools are in %s\n", t.Dir)
		// Helm's own CLIs (v4 and v3), for the e2e tests that prove plain helm works on gpuctl's releases.
		helm, err := sandbox.EnsureHelmCLI(context.Background(), stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "helm: %s\n", helm)
		helm3, err := sandbox.EnsureHelm3CLI(context.Background(), stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "helm v3: %s\n", helm3)
		// The OCI registry and Flux's controllers, for sandboxes started with --registry or --gitops.
		reg, err := sandbox.EnsureRegistry(context.Background(), "", stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "registry %s: %s\n", sandbox.RegistryVersion, reg)
		flux, err := sandbox.EnsureFlux(context.Background(), "", stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "flux source-controller %s: %s\nflux helm-controller %s: %s\n",
			sandbox.FluxSourceControllerVersion, flux.SourceController, sandbox.FluxHelmControllerVersion, flux.HelmController)
		// Node Feature Discovery's own programs, which sandboxes run for NFD's pods.
		nfd, err := sandbox.EnsureNFD(context.Background(), "", stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "nfd-master, nfd-worker, nfd-gc %s: %s, %s, %s\n", sandbox.NFDVersion, nfd.Master, nfd.Worker, nfd.GC)
		// NVIDIA's device plugin and GFD, and the mock NVML they run over, which sandboxes run for
		// the operator's device-plugin and GFD pods.
		dp, err := sandbox.EnsureDevicePlugin(context.Background(), "", stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "nvidia-device-plugin, gpu-feature-discovery, config-manager %s: %s, %s, %s\n", sandbox.DevicePluginVersion, dp.Plugin, dp.GFD, dp.ConfigManager)
		lib, err := sandbox.EnsureMockNVML(context.Background(), "", stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "mock libnvidia-ml.so.1: %s\n", lib)
		for _, r := range releases() {
			if b, ok := t.Operators[r]; ok {
				fmt.Fprintf(stdout, "GPU operator controller %s (built from NVIDIA's sources): %s\n", r, b.Binary)
			} else {
				fmt.Fprintf(stdout, "GPU operator controller %s: sources missing, the fallback module %s stands in\n", r, sandbox.OperatorModuleVersion)
			}
		}
		return nil
	case "env":
		if _, ok := runningPID(dir); !ok {
			return fmt.Errorf("sandbox %q is not running (start it with `sandbox up`)", *name)
		}
		fmt.Fprintf(stdout, "export KUBECONFIG=%s\n", filepath.Join(dir, "cluster", "kubeconfig"))
		return nil
	default:
		return errors.New(usage)
	}
}

// stateDir is where a named sandbox keeps its pid file and cluster state.
func stateDir(name string) (string, error) {
	base := os.Getenv("GPUCTL_SANDBOX_STATE")
	if base == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		base = filepath.Join(c, "gpuctl", "sandbox")
	}
	return filepath.Join(base, name), nil
}

// releases are the GPU operator releases of gpuctl's catalog.
func releases() []string {
	var out []string
	for _, b := range bundle.List() {
		out = append(out, b.Version)
	}
	return out
}

func up(dir string, opts sandbox.Options, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.RemoveAll(filepath.Join(dir, "cluster")); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	pidFile := filepath.Join(dir, "pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	defer os.Remove(pidFile)
	opts.Dir, opts.Progress = filepath.Join(dir, "cluster"), stderr
	c, err := sandbox.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer c.Stop()
	fmt.Fprintf(stdout, "export KUBECONFIG=%s\n", c.Kubeconfig)
	// What else runs, for people (a detached `up` passes these lines on).
	var extras []string
	if c.RegistryHost != "" {
		extras = append(extras, fmt.Sprintf("sandbox: OCI registry at %s (plain HTTP, no auth): oci://%s/REPO", c.RegistryHost, c.RegistryHost))
	}
	if c.FluxNamespace != "" {
		extras = append(extras, fmt.Sprintf("sandbox: Flux's source-controller %s and helm-controller %s watch every namespace; their namespace is %s",
			sandbox.FluxSourceControllerVersion, sandbox.FluxHelmControllerVersion, c.FluxNamespace))
	}
	for _, l := range extras {
		fmt.Fprintln(stderr, l)
	}
	fmt.Fprintf(stderr, "sandbox: %s cluster with %d nodes is up; Ctrl-C or `sandbox down` stops it\n", c.Scenario.Distro, len(c.Nodes))
	if fd := os.Getenv(readyFDEnv); fd != "" {
		if n, err := strconv.Atoi(fd); err == nil {
			f := os.NewFile(uintptr(n), "ready")
			fmt.Fprintln(f, c.Kubeconfig)
			for _, l := range extras {
				fmt.Fprintln(f, l)
			}
			fmt.Fprintln(f) // the end of the report: the sandbox's children may hold the pipe open
			f.Close()
		}
	}
	<-ctx.Done()
	fmt.Fprintln(stderr, "sandbox: stopping")
	return nil
}

// upDetached starts `up` again in a new session, its output in dir/up.log, and waits until it reports
// the cluster ready on a pipe — or exits, in which case its log says why.
func upDetached(dir string, args []string, stdout io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var rest []string
	for _, a := range args {
		if a != "--detach" && a != "-detach" && a != "--detach=true" && a != "-detach=true" {
			rest = append(rest, a)
		}
	}
	logPath := filepath.Join(dir, "up.log")
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append([]string{"up"}, rest...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.ExtraFiles = []*os.File{w} // fd 3
	cmd.Env = append(os.Environ(), readyFDEnv+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	w.Close()
	fmt.Fprintf(os.Stderr, "sandbox: starting in the background (pid %d, log %s); the first run builds Kubernetes and takes about 15 minutes\n", cmd.Process.Pid, logPath)
	ready := bufio.NewReader(r)
	line, _ := ready.ReadString('\n')
	if kubeconfig := strings.TrimSpace(line); kubeconfig != "" {
		// The lines after the kubeconfig, up to an empty one, say what else runs (the registry, Flux).
		for {
			l, err := ready.ReadString('\n')
			if strings.TrimSpace(l) == "" || err != nil {
				break
			}
			fmt.Fprint(os.Stderr, l)
		}
		r.Close()
		_ = cmd.Process.Release()
		fmt.Fprintf(stdout, "export KUBECONFIG=%s\n", kubeconfig)
		return nil
	}
	r.Close()
	_ = cmd.Wait()
	b, _ := os.ReadFile(logPath)
	return fmt.Errorf("the sandbox did not start:\n%s", b)
}

func down(dir, name string, stderr io.Writer) error {
	pid, ok := runningPID(dir)
	if !ok {
		fmt.Fprintf(stderr, "sandbox: %q is not running\n", name)
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			fmt.Fprintf(stderr, "sandbox: %q stopped\n", name)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	return fmt.Errorf("sandbox %q (pid %d) did not stop in 30s and was killed", name, pid)
}

// runningPID reads the pid file and checks the process is alive.
func runningPID(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, syscall.Kill(pid, 0) == nil
}
