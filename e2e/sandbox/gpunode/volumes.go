package gpunode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox/podrun"
)

// configLabel picks a node's device-plugin config (the config-manager's NODE_LABEL in the operator's
// DaemonSets, NVIDIA/gpu-operator assets/state-device-plugin/0500_daemonset.yaml at v26.7.0).
const configLabel = "nvidia.com/device-plugin.config"

// volumes gives each of p's ConfigMap and emptyDir volumes a local directory below dir, shared by
// the pod's containers as the kubelet shares a pod's volumes: a ConfigMap's files projected, an
// emptyDir empty. Other volumes (hostPaths of the node) have none: the programs get what they need
// of the node through the Runner (the mock NVML's driver root, the device-plugins directory).
func (r *Runner) volumes(ctx context.Context, p *corev1.Pod, dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range p.Spec.Volumes {
		local := filepath.Join(dir, "volumes", v.Name)
		switch {
		case v.ConfigMap != nil:
			if _, err := podrun.ProjectConfigMap(ctx, r.cfg.Kube, p, v.Name, local); err != nil {
				return nil, err
			}
		case v.EmptyDir != nil:
			if err := os.MkdirAll(local, 0o755); err != nil {
				return nil, err
			}
		default:
			continue
		}
		out[v.Name] = local
	}
	return out, nil
}

// mountsOf maps c's mount paths of the volumes to their local directories.
func mountsOf(c *corev1.Container, volumes map[string]string) map[string]string {
	out := map[string]string{}
	for _, vm := range c.VolumeMounts {
		if local, ok := volumes[vm.Name]; ok && vm.SubPath == "" {
			out[vm.MountPath] = local
		}
	}
	return out
}

// mapPaths rewrites environment values that name a path below one of mounts to the local path
// (CONFIG_FILE=/config/config.yaml, CONFIG_FILE_SRCDIR=/available-configs).
func mapPaths(env []string, mounts map[string]string) []string {
	out := slices.Clone(env)
	for i, kv := range out {
		k, v, _ := strings.Cut(kv, "=")
		for mp, local := range mounts {
			if v == mp || strings.HasPrefix(v, strings.TrimSuffix(mp, "/")+"/") {
				out[i] = k + "=" + local + strings.TrimPrefix(v, mp)
			}
		}
	}
	return out
}

// pickConfig runs NVIDIA's config-manager once as p's init container that runs it does
// (config-manager-init, ONESHOT=true): it reads the node's nvidia.com/device-plugin.config label
// and copies the config it names from the ConfigMap of configs to the file the program reads. A
// pod without one (no devicePlugin.config in the ClusterPolicy) has nothing to pick.
func (r *Runner) pickConfig(ctx context.Context, p *corev1.Pod, volumes map[string]string, extra []string, logPath string) error {
	i := slices.IndexFunc(p.Spec.InitContainers, func(c corev1.Container) bool {
		return slices.Contains(c.Command, "config-manager")
	})
	if i < 0 {
		return nil
	}
	c := &p.Spec.InitContainers[i]
	env := append(mapPaths(podrun.Env(p, c), mountsOf(c, volumes)), extra...)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.cfg.Build.ConfigManager)
	cmd.Env = env
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer lf.Close()
	fmt.Fprintf(lf, "===== %s: running config-manager (init container %s)\n", time.Now().Format(time.RFC3339), c.Name)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("config-manager (init container %s) of pod %s/%s: %w (its log: %s)", c.Name, p.Namespace, p.Name, err, logPath)
	}
	return nil
}
