package distro_test

import (
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/distro"
	"github.com/gpuctl/gpuctl/internal/profile"
)

// Where each distribution's containerd listens and keeps its config, as preflight's
// toolkit-containerd check judges the toolkit's settings.
func TestContainerdLayouts(t *testing.T) {
	const k3sSocket = "/run/k3s/containerd/containerd.sock"
	tests := []struct {
		distro string
		want   *distro.Containerd // nil: NVIDIA's defaults, or no toolkit
	}{
		{distro.OpenShift, nil},
		{distro.GKE, &distro.Containerd{Socket: distro.DefaultContainerdSocket, FileSourceSince: 2, Usual: true}},
		{distro.EKS, nil},
		{distro.AKS, nil},
		{distro.TKGS, nil},
		{distro.RKE2, &distro.Containerd{Socket: k3sSocket, Managed: "/var/lib/rancher/rke2/agent/etc/containerd/", CDISince: 2}},
		{distro.K3s, &distro.Containerd{Socket: k3sSocket, Managed: "/var/lib/rancher/k3s/agent/etc/containerd/", CDISince: 2}},
		{distro.MicroK8s, &distro.Containerd{Socket: "/var/snap/microk8s/common/run/containerd.sock", Config: "/var/snap/microk8s/current/args/containerd-template.toml", FileSourceSince: 1}},
		{distro.K0s, &distro.Containerd{Socket: "/run/k0s/containerd.sock", Config: "/etc/k0s/containerd.d/nvidia.toml", FileSourceSince: 1}},
		{distro.Kubeadm, &distro.Containerd{Socket: distro.DefaultContainerdSocket, Usual: true}},
	}
	for _, tc := range tests {
		t.Run(tc.distro+"'s containerd", func(t *testing.T) {
			got := distro.Get(tc.distro).Containerd
			if (got == nil) != (tc.want == nil) {
				t.Fatalf("layout %+v, want %+v", got, tc.want)
			}
			if got == nil {
				return
			}
			if got.Source == "" || (got.CDISince > 0) != (got.CDISource != "") {
				t.Errorf("layout %+v: every layout names its source, and a CDI need its own", got)
			}
			g := *got
			g.Source, g.CDISource = "", ""
			if g != *tc.want {
				t.Errorf("layout %+v, want %+v", g, *tc.want)
			}
		})
	}
}

// A distribution's profile sets the toolkit as its containerd layout says: the socket, the config
// file where the distribution fixes one, and the file as RUNTIME_CONFIG_SOURCE where
// `containerd config dump` cannot be trusted.
func TestProfilesSetTheirDistributionsContainerdPaths(t *testing.T) {
	for _, d := range distro.All() {
		l := d.Containerd
		if l == nil {
			continue
		}
		t.Run(d.Profile+" points the toolkit at "+d.Short+"'s containerd", func(t *testing.T) {
			p, err := profile.Get(d.Profile)
			if err != nil {
				t.Fatal(err)
			}
			env := toolkitEnv(p.Values)
			if socket := env["CONTAINERD_SOCKET"]; socket != l.Socket && !(socket == "" && l.Socket == distro.DefaultContainerdSocket) {
				t.Errorf("CONTAINERD_SOCKET %q, want %s", socket, l.Socket)
			}
			if config := env["CONTAINERD_CONFIG"]; l.Config != "" && config != l.Config || l.Managed != "" && strings.HasPrefix(config, l.Managed) {
				t.Errorf("CONTAINERD_CONFIG %q: want %q, and nothing under %q", config, l.Config, l.Managed)
			}
			if source := env["RUNTIME_CONFIG_SOURCE"]; l.FileSourceSince > 0 && !strings.HasPrefix(source, "file") {
				t.Errorf("RUNTIME_CONFIG_SOURCE %q, want file", source)
			}
		})
	}
}

// toolkitEnv is a profile's toolkit.env as a map.
func toolkitEnv(values map[string]any) map[string]string {
	out := map[string]string{}
	tk, _ := values["toolkit"].(map[string]any)
	list, _ := tk["env"].([]any)
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			name, _ := m["name"].(string)
			value, _ := m["value"].(string)
			out[name] = value
		}
	}
	return out
}
