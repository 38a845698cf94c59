package detect

import "testing"

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		w    Workload
		want string
	}{
		{"the operator Deployment by its app label", Workload{Kind: "Deployment", Labels: map[string]string{"app": "gpu-operator"}}, ComponentGPUOperator},
		{"the operator Deployment by its image", Workload{Kind: "Deployment", Images: []string{"nvcr.io/nvidia/gpu-operator:v26.7.0"}}, ComponentGPUOperator},
		{"the validator DaemonSet runs the operator image but is not the operator", Workload{Kind: "DaemonSet", Name: "nvidia-operator-validator", Images: []string{"nvcr.io/nvidia/gpu-operator:v26.7.0"}}, ""},
		{"anything a ClusterPolicy owns is an operand", Workload{Kind: "DaemonSet", Owner: "ClusterPolicy/cluster-policy", Images: []string{"nvcr.io/nvidia/driver:595.91.07-ubuntu24.04"}}, ComponentOperand},
		{"NFD master by its command", Workload{Kind: "Deployment", Name: "x", Commands: []string{"/usr/bin/nfd-master -port=8080"}}, ComponentNFDMaster},
		{"NFD worker by its image and name", Workload{Kind: "DaemonSet", Name: "nfd-worker", Images: []string{"registry.k8s.io/nfd/node-feature-discovery:v0.19.0"}}, ComponentNFDWorker},
		{"NFD gc by its image and name", Workload{Kind: "Deployment", Name: "nfd-node-feature-discovery-gc", Images: []string{"registry.k8s.io/nfd/node-feature-discovery:v0.19.0"}}, ComponentNFDGC},
		{"a standalone device plugin", Workload{Kind: "DaemonSet", Images: []string{"nvcr.io/nvidia/k8s-device-plugin:v0.20.0"}}, ComponentDevicePlugin},
		{"GFD shares the device plugin image", Workload{Kind: "DaemonSet", Name: "gpu-feature-discovery", Images: []string{"nvcr.io/nvidia/k8s-device-plugin:v0.20.0"}}, ComponentGFD},
		{"GKE's device plugin by name in kube-system", Workload{Kind: "DaemonSet", Namespace: "kube-system", Name: "nvidia-gpu-device-plugin-large-cos"}, ComponentGKEDevicePlugin},
		{"GKE's driver installer", Workload{Kind: "DaemonSet", Namespace: "kube-system", Name: "nvidia-driver-installer", Images: []string{"cos-nvidia-installer:fixed"}}, ComponentGKEDriver},
		{"a standalone dcgm-exporter", Workload{Kind: "DaemonSet", Images: []string{"nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless"}}, ComponentDCGMExporter},
		{"an unrelated workload", Workload{Kind: "Deployment", Name: "coredns", Images: []string{"registry.k8s.io/coredns/coredns:v1.12.0"}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.w); got != tc.want {
				t.Errorf("Classify = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestImageRepo(t *testing.T) {
	for in, want := range map[string]string{
		"nvcr.io/nvidia/gpu-operator:v26.7.0":              "nvcr.io/nvidia/gpu-operator",
		"nvcr.io/nvidia/gpu-operator@sha256:abcd":          "nvcr.io/nvidia/gpu-operator",
		"localhost:5000/nvidia/gpu-operator:v26.7.0":       "localhost:5000/nvidia/gpu-operator",
		"localhost:5000/nvidia/gpu-operator":               "localhost:5000/nvidia/gpu-operator",
		"gke.gcr.io/nvidia-gpu-device-plugin:v1@sha256:ab": "gke.gcr.io/nvidia-gpu-device-plugin",
	} {
		if got := imageRepo(in); got != want {
			t.Errorf("imageRepo(%q) = %q, want %q", in, got, want)
		}
	}
}
