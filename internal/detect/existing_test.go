package detect

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Workloads as the real charts and operators create them (NVIDIA/gpu-operator controllers/state_manager.go@v26.7.0;
// https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html).

func operatorDeployment(ns, release string) Workload {
	return Workload{
		Kind: "Deployment", Namespace: ns, Name: "gpu-operator",
		Labels:      map[string]string{"app": "gpu-operator", "app.kubernetes.io/component": "gpu-operator"},
		HelmRelease: release, HelmNamespace: ns,
		Images:   []string{"nvcr.io/nvidia/gpu-operator:v26.7.0"},
		Commands: []string{"gpu-operator --leader-elect --zap-time-encoding=epoch --zap-log-level=info"},
		Desired:  1, Ready: 1,
	}
}

func nfdWorkloads(ns, release string) []Workload {
	img := []string{"registry.k8s.io/nfd/node-feature-discovery:v0.19.0"}
	return []Workload{
		{Kind: "Deployment", Namespace: ns, Name: release + "-node-feature-discovery-master", HelmRelease: release, Images: img, Commands: []string{"nfd-master -port=8080"}, Desired: 1, Ready: 1},
		{Kind: "DaemonSet", Namespace: ns, Name: release + "-node-feature-discovery-worker", HelmRelease: release, Images: img, Commands: []string{"nfd-worker"}, Desired: 3, Ready: 3},
		{Kind: "Deployment", Namespace: ns, Name: release + "-node-feature-discovery-gc", HelmRelease: release, Images: img, Commands: []string{"nfd-gc"}, Desired: 1, Ready: 1},
	}
}

func operandDevicePlugin(ns string) Workload {
	return Workload{
		Kind: "DaemonSet", Namespace: ns, Name: "nvidia-device-plugin-daemonset",
		Owner:        "ClusterPolicy/cluster-policy",
		Images:       []string{"nvcr.io/nvidia/gpu-operator:v26.7.0", "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"},
		Commands:     []string{"nvidia-device-plugin"},
		NodeSelector: map[string]string{"nvidia.com/gpu.deploy.device-plugin": "true"},
		Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Desired:      1, Ready: 1,
	}
}

func TestExisting(t *testing.T) {
	t.Run("a Helm-installed GPU operator with its NFD subchart and a ClusterPolicy", func(t *testing.T) {
		s := kubeadmCluster()
		labels("nvidia.com/gpu.present", "true", "nvidia.com/gpu.deploy.device-plugin", "true",
			"feature.node.kubernetes.io/pci-10de.present", "true")(&s.Nodes[1])
		s.Workloads = append(s.Workloads, operatorDeployment("gpu-operator", "gpu-operator"), operandDevicePlugin("gpu-operator"),
			Workload{Kind: "DaemonSet", Namespace: "gpu-operator", Name: "nvidia-operator-validator", Owner: "ClusterPolicy/cluster-policy",
				Images: []string{"nvcr.io/nvidia/gpu-operator:v26.7.0"}, Desired: 1, Ready: 0})
		s.Workloads = append(s.Workloads, nfdWorkloads("gpu-operator", "gpu-operator")...)
		s.HelmReleases = []HelmRelease{{Name: "gpu-operator", Namespace: "gpu-operator", Revision: 2, Status: "deployed",
			Chart: "gpu-operator", ChartVersion: "v26.7.0", AppVersion: "v26.7.0", Storage: "Secret"}}
		s.ClusterPolicies = []ClusterPolicy{{Name: "cluster-policy", Created: time.Unix(100, 0), State: "notReady", ReadyReason: "OperandNotReady"}}

		e := Analyze(s).Existing
		op := e.GPUOperator
		if !op.Present || op.Namespace != "gpu-operator" || op.Deployment == nil || op.Helm == nil || op.Helm.ChartVersion != "v26.7.0" {
			t.Fatalf("operator = %+v", op)
		}
		if op.Deployment.ManagedBy != "helm release gpu-operator/gpu-operator" {
			t.Errorf("operator managed by %q", op.Deployment.ManagedBy)
		}
		if !e.NFD.Present || len(e.NFD.Workloads) != 3 || !reflect.DeepEqual(e.NFD.Namespaces, []string{"gpu-operator"}) {
			t.Errorf("nfd = %+v", e.NFD)
		}
		if e.NFD.Helm == nil || e.NFD.Helm.Chart != "gpu-operator" {
			t.Errorf("nfd helm = %+v, want the gpu-operator release (subchart)", e.NFD.Helm)
		}
		if len(e.DevicePlugins) != 1 || e.DevicePlugins[0].Provider != "gpu-operator" || !reflect.DeepEqual(e.DevicePlugins[0].Nodes, []string{"gpu-1"}) {
			t.Errorf("device plugins = %+v", e.DevicePlugins)
		}
		if len(e.Operands) != 1 || e.Operands[0].Name != "nvidia-operator-validator" {
			t.Errorf("operands = %+v", e.Operands)
		}
		if e.ActiveClusterPolicy != "cluster-policy" {
			t.Errorf("active ClusterPolicy = %q", e.ActiveClusterPolicy)
		}
	})

	t.Run("a failed gpu-operator release without a Deployment is still found by its chart", func(t *testing.T) {
		s := kubeadmCluster()
		s.HelmReleases = []HelmRelease{
			{Name: "gpu", Namespace: "nvidia", Revision: 1, Status: "failed", Chart: "gpu-operator", ChartVersion: "v26.7.0"},
			{Name: "ingress", Namespace: "ingress", Revision: 4, Status: "deployed", Chart: "ingress-nginx"},
		}
		r := Analyze(s)
		op := r.Existing.GPUOperator
		if !op.Present || op.Deployment != nil || op.Helm == nil || op.Helm.Name != "gpu" || op.Namespace != "nvidia" {
			t.Fatalf("operator = %+v", op)
		}
		if !warned(r, "nvidia/gpu is failed") {
			t.Errorf("warnings = %v, want the failed release", r.Warnings)
		}
	})

	t.Run("OpenShift's operator and NFD come from OLM subscriptions", func(t *testing.T) {
		s := openshiftCluster()
		s.Subscriptions = []Subscription{
			{Namespace: "nvidia-gpu-operator", Name: "gpu-operator-certified", Package: "gpu-operator-certified", Channel: "v26.7", Source: "certified-operators", InstalledCSV: "gpu-operator-certified.v26.7.0", State: "AtLatestKnown"},
			{Namespace: "openshift-nfd", Name: "nfd", Package: "nfd", Channel: "stable", Source: "redhat-operators", InstalledCSV: "nfd.4.18.0"},
		}
		s.Workloads = []Workload{
			{Kind: "Deployment", Namespace: "nvidia-gpu-operator", Name: "gpu-operator", Labels: map[string]string{"app": "gpu-operator", "olm.owner": "gpu-operator-certified.v26.7.0"},
				Images: []string{"nvcr.io/nvidia/gpu-operator@sha256:abcd"}, Desired: 1, Ready: 1},
			{Kind: "Deployment", Namespace: "openshift-nfd", Name: "nfd-controller-manager", Images: []string{"registry.redhat.io/openshift4/ose-cluster-nfd-operator-rhel9@sha256:1"}},
			{Kind: "DaemonSet", Namespace: "openshift-nfd", Name: "nfd-worker", Images: []string{"registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9@sha256:2"}, Commands: []string{"nfd-worker --feature-gates=NodeFeatureAPI=true"}},
		}
		e := Analyze(s).Existing
		if e.GPUOperator.OLM == nil || e.GPUOperator.OLM.InstalledCSV != "gpu-operator-certified.v26.7.0" || e.GPUOperator.Deployment == nil {
			t.Errorf("operator = %+v", e.GPUOperator)
		}
		if !strings.HasPrefix(e.GPUOperator.Deployment.ManagedBy, "OLM") {
			t.Errorf("operator managed by %q, want OLM", e.GPUOperator.Deployment.ManagedBy)
		}
		if e.NFD.OLM == nil || e.NFD.OLM.Namespace != "openshift-nfd" || len(e.NFD.Workloads) != 1 {
			t.Errorf("nfd = %+v", e.NFD)
		}
	})

	t.Run("a Subscription is gpuctl's only when a Helm release with gpuctl's label applied it", func(t *testing.T) {
		s := openshiftCluster()
		s.HelmReleases = []HelmRelease{{Name: "gpu-operator-certified", Namespace: "nvidia-gpu-operator", Revision: 1, Status: "deployed", Gpuctl: true}}
		s.Subscriptions = []Subscription{
			{Namespace: "nvidia-gpu-operator", Name: "gpu-operator-certified", Package: "gpu-operator-certified", HelmRelease: "gpu-operator-certified", HelmNamespace: "nvidia-gpu-operator"},
			{Namespace: "openshift-nfd", Name: "nfd", Package: "nfd"},
		}
		e := Analyze(s).Existing
		if e.GPUOperator.OLM == nil || !e.GPUOperator.OLM.Gpuctl {
			t.Errorf("operator subscription %+v: want gpuctl's (its Helm release is labelled)", e.GPUOperator.OLM)
		}
		if e.NFD.OLM == nil || e.NFD.OLM.Gpuctl {
			t.Errorf("NFD subscription %+v: created without Helm, not gpuctl's", e.NFD.OLM)
		}
	})

	t.Run("the oldest of several ClusterPolicies is the one honoured", func(t *testing.T) {
		s := kubeadmCluster()
		s.ClusterPolicies = []ClusterPolicy{
			{Name: "gpu-cluster-policy", Created: time.Unix(200, 0), State: "ignored"},
			{Name: "cluster-policy", Created: time.Unix(100, 0), State: "ready", ReadyReason: "NoGPUNodes"},
		}
		r := Analyze(s)
		if r.Existing.ActiveClusterPolicy != "cluster-policy" {
			t.Errorf("active = %q", r.Existing.ActiveClusterPolicy)
		}
		if !warned(r, "2 ClusterPolicies") || !warned(r, "reason NoGPUNodes") {
			t.Errorf("warnings = %v", r.Warnings)
		}
	})

	t.Run("GKE's device plugin and a standalone one on the same node are a conflict", func(t *testing.T) {
		s := gkeCluster()
		s.Workloads = append(s.Workloads, Workload{
			Kind: "DaemonSet", Namespace: "nvidia-device-plugin", Name: "nvdp-nvidia-device-plugin", HelmRelease: "nvdp",
			Images:      []string{"nvcr.io/nvidia/k8s-device-plugin:v0.17.0"},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Desired:     1,
		}, Workload{
			Kind: "DaemonSet", Namespace: "nvidia-device-plugin", Name: "nvdp-gpu-feature-discovery", HelmRelease: "nvdp",
			Images: []string{"nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}, Commands: []string{"gpu-feature-discovery"},
		})
		r := Analyze(s)
		var providers []string
		for _, dp := range r.Existing.DevicePlugins {
			providers = append(providers, dp.Provider)
		}
		if !reflect.DeepEqual(providers, []string{"gke", "standalone"}) {
			t.Fatalf("device plugins = %+v", r.Existing.DevicePlugins)
		}
		gke := r.Existing.DevicePlugins[0]
		if !reflect.DeepEqual(gke.Nodes, []string{"gke-sample-gpu-cluste-sample-gpu-pool-020622ba-0g7w"}) || gke.ManagedBy != "GKE" {
			t.Errorf("GKE device plugin = %+v, want only the GPU node", gke)
		}
		// The standalone plugin has no selector and tolerates the GPU taint: it targets both nodes.
		if n := len(r.Existing.DevicePlugins[1].Nodes); n != 2 {
			t.Errorf("standalone plugin targets %d nodes, want 2", n)
		}
		if !warned(r, "more than one NVIDIA device plugin targets gke-sample-gpu-cluste-sample-gpu-pool-020622ba-0g7w") {
			t.Errorf("warnings = %v", r.Warnings)
		}
	})

	t.Run("two NFDs in different namespaces are a conflict", func(t *testing.T) {
		s := kubeadmCluster()
		s.Workloads = append(nfdWorkloads("node-feature-discovery", "nfd"), nfdWorkloads("nvidia-device-plugin", "nvdp")...)
		r := Analyze(s)
		if got := r.Existing.NFD.Namespaces; !reflect.DeepEqual(got, []string{"node-feature-discovery", "nvidia-device-plugin"}) {
			t.Errorf("namespaces = %v", got)
		}
		if !warned(r, "NFD runs in 2 namespaces") {
			t.Errorf("warnings = %v", r.Warnings)
		}
	})

	t.Run("NFD labels without NFD workloads mean an earlier run", func(t *testing.T) {
		s := kubeadmCluster()
		labels("feature.node.kubernetes.io/kernel-version.full", "6.8.0-79-generic")(&s.Nodes[2])
		e := Analyze(s).Existing
		if e.NFD.Present || e.NFD.LabelledNodes != 1 {
			t.Errorf("nfd = %+v", e.NFD)
		}
	})

	t.Run("a GPUCluster is reported and warned about", func(t *testing.T) {
		s := kubeadmCluster()
		s.GPUClusters = []string{"default"}
		r := Analyze(s)
		if !reflect.DeepEqual(r.Existing.GPUClusters, []string{"default"}) || !warned(r, "GPUCluster default") {
			t.Errorf("existing = %+v, warnings = %v", r.Existing, r.Warnings)
		}
	})

	t.Run("a cluster with nothing installed reports nothing", func(t *testing.T) {
		e := Analyze(kubeadmCluster()).Existing
		if e.NFD.Present || e.GPUOperator.Present || len(e.DevicePlugins) > 0 || len(e.ClusterPolicies) > 0 || len(e.HostDriverNodes) > 0 {
			t.Errorf("existing = %+v", e)
		}
	})
}

func warned(r Result, sub string) bool {
	for _, w := range r.Warnings {
		if strings.Contains(w, sub) {
			return true
		}
	}
	return false
}
