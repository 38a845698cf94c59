package preflight

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/plan"
)

func TestDriverNodes(t *testing.T) {
	env := driversEnv("kubeadm", []detect.GPUNode{
		nodeOn("gpu-1", "6.8.0-60-generic", "Ubuntu 24.04.2 LTS", "containerd://2.1.4"),
		nodeOn("gpu-2", "5.15.0-153-generic", "Ubuntu 22.04.5 LTS", "containerd://2.1.4"),
		nodeOn("gpu-3", "6.8.0-60-generic", "Ubuntu 24.04.2 LTS", "containerd://2.1.4"),
	})
	r := checkDriverNodes(context.Background(), env)
	want := "kernel 5.15.0-153-generic, Ubuntu 22.04.5 LTS, containerd://2.1.4: gpu-2\nkernel 6.8.0-60-generic, Ubuntu 24.04.2 LTS, containerd://2.1.4: gpu-1, gpu-3"
	if r.Status != StatusPass || r.Message != want {
		t.Errorf("nodes alike are one line:\n got %s %q\nwant pass %q", r.Status, r.Message, want)
	}
	if r := checkDriverNodes(context.Background(), driversEnv("kubeadm", nil)); r.Status != StatusSkip {
		t.Errorf("without GPU nodes: %s %q, want skip", r.Status, r.Message)
	}
}

func TestPrecompiledDriver(t *testing.T) {
	nodes := []detect.GPUNode{
		nodeOn("gpu-1", "6.8.0-60-generic", "Ubuntu 24.04.2 LTS", "containerd://2.1.4"),
		nodeOn("gpu-2", "6.8.0-60-generic", "Ubuntu 24.04.2 LTS", "containerd://2.1.4"),
		nodeOn("gpu-3", "6.8.0-1017-aws", "Ubuntu 24.04.2 LTS", "containerd://2.1.4"),
	}
	published := map[string][]string{"nvcr.io/nvidia/driver": {"595-6.8.0-60-generic-ubuntu24.04", "595.91.07-ubuntu24.04"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-operator", Name: "mirror"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
	for _, tc := range []struct {
		name        string
		driver      map[string]any
		nodes       []detect.GPUNode
		tags        *fakeTags
		want        Status
		wantMessage []string
		wantHint    string
		wantAsked   string
	}{
		{name: "compiled drivers need no image per kernel", driver: map[string]any{"enabled": true, "usePrecompiled": false},
			nodes: nodes, tags: &fakeTags{repos: published}, want: StatusSkip},
		{name: "every kernel with an image passes", driver: precompiledDriver("595"), nodes: nodes[:2], tags: &fakeTags{repos: published},
			want: StatusPass, wantMessage: []string{"nvcr.io/nvidia/driver:595-6.8.0-60-generic-ubuntu24.04 for kernel 6.8.0-60-generic on gpu-1, gpu-2"}},
		{name: "a kernel without an image fails naming its node and kernel", driver: precompiledDriver("595"), nodes: nodes, tags: &fakeTags{repos: published},
			want: StatusFail, wantMessage: []string{"no precompiled driver nvcr.io/nvidia/driver:595-6.8.0-1017-aws-ubuntu24.04 for kernel 6.8.0-1017-aws (Ubuntu 24.04.2 LTS) on gpu-3"},
			wantHint: "driver.usePrecompiled=false"},
		{name: "a full driver version is named as the likely mistake", driver: precompiledDriver("595.91.07"), nodes: nodes[:1], tags: &fakeTags{repos: published},
			want: StatusFail, wantMessage: []string{"595.91.07-6.8.0-60-generic-ubuntu24.04"}, wantHint: "set driver.version to the branch (e.g. 595)"},
		{name: "a registry without the repository fails every node", driver: precompiledDriver("595"), nodes: nodes, tags: &fakeTags{},
			want: StatusFail, wantMessage: []string{"on gpu-1, gpu-2", "on gpu-3"}},
		{name: "an unreachable registry is a warning", driver: precompiledDriver("595"), nodes: nodes,
			tags: &fakeTags{err: errors.New("dial tcp 127.0.0.1:5000: connect: connection refused")},
			want: StatusWarn, wantMessage: []string{"cannot list the tags of nvcr.io/nvidia/driver (dial tcp 127.0.0.1:5000: connect: connection refused)"}, wantHint: "air-gapped"},
		{name: "an OS without precompiled images is a warning", driver: precompiledDriver("595"),
			nodes: []detect.GPUNode{nodeOn("gpu-9", "6.1.0-1", "Debian GNU/Linux 12 (bookworm)", "containerd://1.7.0")}, tags: &fakeTags{repos: published},
			want: StatusWarn, wantMessage: []string{"cannot tell the precompiled image of gpu-9"}},
		{name: "the pull secrets that exist go with the request", driver: precompiledDriver("595", "mirror", "not-yet"), nodes: nodes[:1], tags: &fakeTags{repos: published},
			want: StatusPass, wantAsked: "nvcr.io/nvidia/driver (1 logins)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := driversEnv("kubeadm", tc.nodes, clusterPolicy(tc.driver, nil, nil))
			env.Kube = fake.NewClientset(secret)
			env.Tags = tc.tags
			r := checkPrecompiledDriver(context.Background(), env)
			if r.Status != tc.want {
				t.Fatalf("status %s (%s; hint %s), want %s", r.Status, r.Message, r.Hint, tc.want)
			}
			for _, w := range tc.wantMessage {
				if !strings.Contains(r.Message, w) {
					t.Errorf("message %q lacks %q", r.Message, w)
				}
			}
			if !strings.Contains(r.Hint, tc.wantHint) {
				t.Errorf("hint %q lacks %q", r.Hint, tc.wantHint)
			}
			if tc.wantAsked != "" && (len(tc.tags.asked) != 1 || tc.tags.asked[0] != tc.wantAsked) {
				t.Errorf("asked %v, want [%s]", tc.tags.asked, tc.wantAsked)
			}
		})
	}
}

// TestPrecompiledDriverNVIDIADrivers: with NVIDIADrivers, each is judged for the GPU nodes its
// nodeSelector picks.
func TestPrecompiledDriverNVIDIADrivers(t *testing.T) {
	nodes := []detect.GPUNode{
		nodeOn("gpu-1", "6.8.0-60-generic", "Ubuntu 24.04.2 LTS", "containerd://2.1.4"),
		nodeOn("gpu-3", "6.8.0-1017-aws", "Ubuntu 24.04.2 LTS", "containerd://2.1.4"),
	}
	nd := func(name string, precompiled bool, sel map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"usePrecompiled": precompiled, "repository": "nvcr.io/nvidia", "image": "driver", "version": "595", "nodeSelector": sel}}}
	}
	policy := clusterPolicy(map[string]any{"enabled": true, "useNvidiaDriverCRD": true}, nil, nil)
	kube := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{"k": "generic"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-3", Labels: map[string]string{"k": "aws"}}},
	)
	env := driversEnv("kubeadm", nodes, policy, nd("precompiled", true, map[string]any{"k": "generic"}), nd("compiled", false, map[string]any{"k": "aws"}),
		nd("precompiled-again", true, map[string]any{"k": "generic"}))
	env.Kube = kube
	tags := &fakeTags{repos: map[string][]string{"nvcr.io/nvidia/driver": {"595-6.8.0-60-generic-ubuntu24.04"}}}
	env.Tags = tags
	if r := checkPrecompiledDriver(context.Background(), env); r.Status != StatusPass || strings.Contains(r.Message, "gpu-3") {
		t.Errorf("the precompiled NVIDIADrivers select gpu-1 only: %s %q", r.Status, r.Message)
	}
	if len(tags.asked) != 1 {
		t.Errorf("the registry was asked %v; want once for the one repository", tags.asked)
	}
}

func TestToolkitContainerd(t *testing.T) {
	env := func(kv ...string) map[string]any {
		var list []any
		for i := 0; i+1 < len(kv); i += 2 {
			list = append(list, map[string]any{"name": kv[i], "value": kv[i+1]})
		}
		return map[string]any{"enabled": true, "env": list}
	}
	on := map[string]any{"enabled": true}
	node := func(rt string) []detect.GPUNode {
		return []detect.GPUNode{nodeOn("gpu-1", "6.8.0-60-generic", "Ubuntu 24.04.2 LTS", rt)}
	}
	for _, tc := range []struct {
		name    string
		distro  string
		toolkit map[string]any
		cdi     map[string]any
		nodes   []detect.GPUNode
		want    Status
		wantMsg string
	}{
		{"RKE2 with the k3s socket passes", "rke2", env("CONTAINERD_SOCKET", "/run/k3s/containerd/containerd.sock"), on, node("containerd://2.0.5-k3s1"), StatusPass, "as RKE2's containerd needs"},
		{"RKE2 with NVIDIA's default socket fails", "rke2", env(), on, node("containerd://2.0.5-k3s1"), StatusFail, "RKE2's containerd listens on /run/k3s/containerd/containerd.sock"},
		{"RKE2 with the old config.toml.tmpl guidance warns", "rke2",
			env("CONTAINERD_SOCKET", "/run/k3s/containerd/containerd.sock", "CONTAINERD_CONFIG", "/var/lib/rancher/rke2/agent/etc/containerd/config.toml.tmpl"), on, node("containerd://2.0.5-k3s1"),
			StatusWarn, "a file RKE2 writes itself"},
		{"K3s on containerd 1.7 with CDI warns", "k3s", env("CONTAINERD_SOCKET", "/run/k3s/containerd/containerd.sock"), on, node("containerd://1.7.27-k3s1"), StatusWarn, "wants containerd 2.0"},
		{"MicroK8s without the template fails", "microk8s", env("CONTAINERD_SOCKET", "/var/snap/microk8s/common/run/containerd.sock", "RUNTIME_CONFIG_SOURCE", "file=/var/snap/microk8s/current/args/containerd.toml"), on, node("containerd://1.7.27"),
			StatusFail, "reads its settings from /var/snap/microk8s/current/args/containerd-template.toml"},
		{"k0s with the profile's settings passes", "k0s", env("CONTAINERD_SOCKET", "/run/k0s/containerd.sock", "CONTAINERD_CONFIG", "/etc/k0s/containerd.d/nvidia.toml", "RUNTIME_CONFIG_SOURCE", "file"), on, node("containerd://1.7.27"), StatusPass, ""},
		{"k0s reading the config with containerd config dump warns", "k0s", env("CONTAINERD_SOCKET", "/run/k0s/containerd.sock", "CONTAINERD_CONFIG", "/etc/k0s/containerd.d/nvidia.toml"), on, node("containerd://1.7.27"), StatusWarn, "RUNTIME_CONFIG_SOURCE is unset"},
		{"GKE on containerd 2 needs the file source", "gke", env(), on, node("containerd://2.0.4"), StatusWarn, "GKE with containerd 2.0.4"},
		{"GKE on containerd 1.7 does not", "gke", env(), on, node("containerd://1.7.28"), StatusPass, ""},
		{"kubeadm with NVIDIA's defaults passes", "kubeadm", env(), on, node("containerd://2.1.4"), StatusPass, "socket /run/containerd/containerd.sock"},
		{"kubeadm with another socket warns: its containerd may listen elsewhere", "kubeadm", env("CONTAINERD_SOCKET", "/run/k3s/containerd/containerd.sock"), on, node("containerd://2.1.4"), StatusWarn, "usually listens on /run/containerd/containerd.sock"},
		{"the NRI plugin on containerd 2.0 fails", "kubeadm", env(), map[string]any{"enabled": true, "nriPluginEnabled": true}, node("containerd://2.0.5"), StatusFail, "needs containerd 2.1"},
		{"an unknown distribution with the k3s socket warns", "tkgs", env("CONTAINERD_SOCKET", "/run/k3s/containerd/containerd.sock"), on, node("containerd://2.0.5"), StatusWarn, "K3s's socket"},
		{"CRI-O nodes skip the containerd settings", "openshift", env(), on, node("cri-o://1.31.0"), StatusSkip, ""},
		{"no toolkit, nothing to judge", "eks", map[string]any{"enabled": false}, on, node("containerd://1.7.27"), StatusSkip, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := driversEnv(tc.distro, tc.nodes, clusterPolicy(map[string]any{"enabled": true}, tc.toolkit, tc.cdi))
			r := checkToolkitContainerd(context.Background(), e)
			if r.Status != tc.want || !strings.Contains(r.Message, tc.wantMsg) {
				t.Errorf("%s %q (hint %q), want %s containing %q", r.Status, r.Message, r.Hint, tc.want, tc.wantMsg)
			}
		})
	}
}

// TestDriversChecksAreRegistered: the three checks run in the Drivers category, before Scheduling.
func TestDriversChecksAreRegistered(t *testing.T) {
	var got []string
	for _, c := range Checks() {
		if c.Category == CategoryDrivers {
			got = append(got, c.ID)
		}
	}
	if strings.Join(got, ",") != "driver-nodes,toolkit-containerd,precompiled-driver" {
		t.Errorf("Drivers checks %v", got)
	}
}

// TestDriversBeforeNFD: before any node shows its GPU, the checks look at the workers, and a worker
// without a precompiled image is a warning, since it may not be a GPU node.
func TestDriversBeforeNFD(t *testing.T) {
	env := driversEnv("kubeadm", nil, clusterPolicy(precompiledDriver("595"), map[string]any{"enabled": true}, nil))
	env.Detection.Pools = []detect.Pool{
		{Name: "control-plane", ControlPlane: true, Nodes: []string{"cp-1"}, Kernels: []string{"5.15.0-153-generic"}, OSImages: []string{"Ubuntu 22.04.5 LTS"}, Runtimes: []string{"containerd://2.1.4"}},
		{Name: "worker-a", Nodes: []string{"w-1", "w-2"}, Kernels: []string{"6.8.0-60-generic"}, OSImages: []string{"Ubuntu 24.04.2 LTS"}, Runtimes: []string{"containerd://2.1.4"}},
		{Name: "worker-b", Nodes: []string{"w-3", "w-4"}, Kernels: []string{"6.8.0-60-generic", "6.8.0-1017-aws"}, OSImages: []string{"Ubuntu 24.04.2 LTS"}, Runtimes: []string{"containerd://2.1.4"}},
	}
	r := checkDriverNodes(context.Background(), env)
	if r.Status != StatusPass || !strings.Contains(r.Message, "the workers:") || !strings.Contains(r.Message, "kernel 6.8.0-1017-aws, Ubuntu 24.04.2 LTS, containerd://2.1.4: pool worker-b") ||
		strings.Contains(r.Message, "cp-1") {
		t.Errorf("driver-nodes %s %q: want the workers, by node where their pool has one kernel", r.Status, r.Message)
	}
	env.Tags = &fakeTags{repos: map[string][]string{"nvcr.io/nvidia/driver": {"595-6.8.0-60-generic-ubuntu24.04"}}}
	r = checkPrecompiledDriver(context.Background(), env)
	if r.Status != StatusWarn || !strings.Contains(r.Message, "if these workers are GPU nodes") || !strings.Contains(r.Message, "for kernel 6.8.0-1017-aws (Ubuntu 24.04.2 LTS) on pool worker-b") {
		t.Errorf("precompiled-driver %s %q: want a warning naming the pool's kernel without an image", r.Status, r.Message)
	}
	if r := checkToolkitContainerd(context.Background(), env); r.Status != StatusPass {
		t.Errorf("toolkit-containerd %s %q: the workers' containerd is judged", r.Status, r.Message)
	}
}

// TestPrecompiledDriverByKernelBeforeNFD: --precompiled auto's NVIDIADrivers select their nodes by
// NFD's kernel label, which a fresh cluster's nodes do not have yet; the check matches them on the
// kernel their Node objects report, as NFD will label it.
func TestPrecompiledDriverByKernelBeforeNFD(t *testing.T) {
	nodes := []detect.GPUNode{
		nodeOn("gpu-1", "6.8.0-60-generic", "Ubuntu 24.04.2 LTS", "containerd://2.1.4"),
		nodeOn("gpu-3", "6.8.0-1017-aws", "Ubuntu 24.04.2 LTS", "containerd://2.1.4"),
	}
	kernelDriver := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": map[string]any{"name": "kernel-6.8.0-1017-aws"},
		"spec": map[string]any{"usePrecompiled": true, "repository": "nvcr.io/nvidia", "image": "driver", "version": "595",
			"nodeSelector": map[string]any{plan.KernelLabel: "6.8.0-1017-aws"}}}}
	policy := clusterPolicy(map[string]any{"enabled": true, "useNvidiaDriverCRD": true}, nil, nil)
	env := driversEnv("kubeadm", nodes, policy, kernelDriver)
	env.Kube = fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-3"}})
	env.Tags = &fakeTags{repos: map[string][]string{"nvcr.io/nvidia/driver": {"595-6.8.0-60-generic-ubuntu24.04"}}}
	r := checkPrecompiledDriver(context.Background(), env)
	if r.Status != StatusFail || !strings.Contains(r.Message, "for kernel 6.8.0-1017-aws (Ubuntu 24.04.2 LTS) on gpu-3") || strings.Contains(r.Message, "gpu-1") {
		t.Errorf("want gpu-3 named, selected by the kernel it reports: %s %q", r.Status, r.Message)
	}
}
