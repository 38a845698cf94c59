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
// and links the file the program reads (CONFIG_FILE_DST) to the config it names in the ConfigMap of
// configs (CONFIG_FILE_SRCDIR). A pod without one (no devicePlugin.config in the ClusterPolicy) has
// nothing to pick.
//
// The one-shot run reads the label before its node informer has delivered the node, and so picks
// the default (config-manager's SyncableConfig.Get returns at once on its first call,
// cmd/config-manager/main.go at v0.19.0); on a real node the pod's config-manager sidecar then sees
// the label, links the config it names and sends the program SIGHUP. The Runner plays that sidecar
// with NVIDIA's code too: when the link is not the labelled config, it runs config-manager once more
// with the label's value as DEFAULT_CONFIG, which links that config (or fails, as the sidecar does,
// on a config the ConfigMap lacks). It restarts the programs when the label changes (nodeUpdated).
func (r *Runner) pickConfig(ctx context.Context, p *corev1.Pod, volumes map[string]string, extra []string, logPath string) error {
	i := slices.IndexFunc(p.Spec.InitContainers, func(c corev1.Container) bool {
		return slices.Contains(c.Command, "config-manager")
	})
	if i < 0 {
		return nil
	}
	c := &p.Spec.InitContainers[i]
	env := append(mapPaths(podrun.Env(p, c), mountsOf(c, volumes)), extra...)
	if err := r.runConfigManager(ctx, p, c.Name, env, logPath); err != nil {
		return err
	}
	label, ok := r.picked(p.Spec.NodeName, env)
	if ok {
		return nil
	}
	return r.runConfigManager(ctx, p, "config-manager (the sidecar, seeing "+configLabel+"="+label+")", append(env, "DEFAULT_CONFIG="+label), logPath)
}

// picked reports whether the config file config-manager linked is the one the node's label names
// (always, when the label names none: then its default or fallback applies), and the label.
func (r *Runner) picked(node string, env []string) (string, bool) {
	n, err := r.nodes.Get(node)
	if err != nil || n.Labels[configLabel] == "" {
		return "", true
	}
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	label := n.Labels[configLabel]
	got, _ := os.Readlink(vars["CONFIG_FILE_DST"])
	return label, got == filepath.Join(vars["CONFIG_FILE_SRCDIR"], label)
}

// runConfigManager runs config-manager with env, its output appended to logPath.
func (r *Runner) runConfigManager(ctx context.Context, p *corev1.Pod, as string, env []string, logPath string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.cfg.Build.ConfigManager)
	cmd.Env = env
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer lf.Close()
	fmt.Fprintf(lf, "===== %s: running config-manager as %s\n", time.Now().Format(time.RFC3339), as)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("config-manager as %s of pod %s/%s: %w (its log: %s)", as, p.Namespace, p.Name, err, logPath)
	}
	return nil
}
