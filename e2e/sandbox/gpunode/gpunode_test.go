package gpunode

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

func TestSelectPodRunsNVIDIAsPluginAndGFDOfV019AndNewer(t *testing.T) {
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	master := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nfd-master", Namespace: "gpu-operator"},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "master", Image: "registry.k8s.io/nfd/node-feature-discovery:v0.19.0", Command: []string{"nfd-master"}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if err := pods.Add(master); err != nil {
		t.Fatal(err)
	}
	r := &Runner{pods: corelisters.NewPodLister(pods), cfg: Config{Hardware: map[string]standin.Hardware{
		"a100": {GPUs: 2, GPUProduct: standin.GPUA100SXM40},
		"vgpu": {GPUs: 1, GPUProduct: standin.GPUA100vGPU40C},
		"cpu":  {},
	}}}
	plugin := func(image, node string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{
			{Name: "nvidia-device-plugin", Image: image, Command: []string{"/bin/sh", "-c"}, Args: []string{"/bin/entrypoint.sh"}},
			{Name: "config-manager", Image: image, Command: []string{"config-manager"}},
		}}}
	}
	gfd := func(image string, env ...corev1.EnvVar) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeName: "a100", Containers: []corev1.Container{
			{Name: "gpu-feature-discovery", Image: image, Command: []string{"gpu-feature-discovery"}, Env: env},
		}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
		prog string
	}{
		{"the operator's plugin pod of v26.7.0 (v0.20.0)", plugin("nvcr.io/nvidia/k8s-device-plugin:v0.20.0", "a100"), true, pluginProgram},
		{"the operator's plugin pod of v26.3.3 (v0.19.3)", plugin("nvcr.io/nvidia/k8s-device-plugin:v0.19.3", "a100"), true, pluginProgram},
		{"an older plugin (v25.10.1's v0.18.1)", plugin("nvcr.io/nvidia/k8s-device-plugin:v0.18.1", "a100"), false, pluginProgram},
		{"a vGPU guest's GPU, which the mock does not know", plugin("nvcr.io/nvidia/k8s-device-plugin:v0.20.0", "vgpu"), false, pluginProgram},
		{"a node without GPUs", plugin("nvcr.io/nvidia/k8s-device-plugin:v0.20.0", "cpu"), false, pluginProgram},
		{"GKE's own plugin", plugin("gke.gcr.io/nvidia-gpu-device-plugin:v1.0", "a100"), false, ""},
		{"GFD", gfd("nvcr.io/nvidia/k8s-device-plugin:v0.20.0"), true, gfdProgram},
		{"GFD writing a features.d file (OpenShift)", gfd("nvcr.io/nvidia/k8s-device-plugin:v0.20.0", corev1.EnvVar{Name: "USE_NODE_FEATURE_API", Value: "false"}), false, gfdProgram},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, prog := container(tc.pod); prog != tc.prog {
				t.Errorf("program %q, want %q", prog, tc.prog)
			}
			if got, why := r.selectPod(tc.pod); got != tc.want || (!got && tc.prog != "" && why == "") {
				t.Errorf("selectPod = %v (%q), want %v with a reason when not", got, why, tc.want)
			}
		})
	}
}

func TestMapPathsPointsTheContainersPathsAtTheVolumesCopies(t *testing.T) {
	got := mapPaths([]string{"CONFIG_FILE=/config/config.yaml", "CONFIG_FILE_SRCDIR=/available-configs", "X=/configuration", "Y=y"},
		map[string]string{"/config": "/tmp/p/volumes/config", "/available-configs": "/tmp/p/volumes/cm"})
	want := []string{"CONFIG_FILE=/tmp/p/volumes/config/config.yaml", "CONFIG_FILE_SRCDIR=/tmp/p/volumes/cm", "X=/configuration", "Y=y"}
	if !slices.Equal(got, want) {
		t.Errorf("mapPaths = %v, want %v", got, want)
	}
}

func TestNVMLConfigShowsTheNodesMIGDevices(t *testing.T) {
	hw := standin.Hardware{GPUs: 2, GPUProduct: standin.GPUA100SXM40}
	cfg, err := nvmlConfig("gpu-0", hw, standin.MIGLayout{GPUs: []map[string]int{{"1g.5gb": 2, "3g.20gb": 1}, nil}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.GPUs) != 2 || !cfg.GPUs[0].MIGEnabled || cfg.GPUs[1].MIGEnabled {
		t.Fatalf("GPUs %+v: want MIG on GPU 0 only", cfg.GPUs)
	}
	var profiles []string
	for _, d := range cfg.GPUs[0].MIGDevices {
		profiles = append(profiles, d.Profile)
	}
	if want := []string{"1g.5gb", "1g.5gb", "3g.20gb"}; !slices.Equal(profiles, want) {
		t.Errorf("MIG devices %v, want %v", profiles, want)
	}
}
