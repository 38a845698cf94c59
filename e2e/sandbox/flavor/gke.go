package flavor

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// GKE facts used below. Sources: https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html
// (modes, device-plugin opt-out label, driver install path), replicatedhq/troubleshoot pkg/analyze/distribution.go (labels, gce://
// provider IDs, "-gke." kubelet suffix, COS), https://cloud.google.com/kubernetes-engine/docs/how-to/gpus (GPU taint);
// a user's published GKE GPU walk-through (node names gke-<cluster>-<pool>-<hash>-<suffix>, nvidia-gpu-device-plugin pods in
// kube-system); GoogleCloudPlatform/container-engine-accelerators cmd/nvidia_gpu/device-plugin.yaml
// (the plugin DaemonSet's shape).
const (
	gkeProject       = "gpuctl-sandbox"
	gkeCluster       = "sandbox"
	gkeRegion        = "us-central1"
	gkeZone          = "us-central1-a"
	gkeKubeletSuffix = "-gke.1172000"
	// gkeNoDevicePluginLabel on a GPU node pool keeps GKE's own device plugin off it; NVIDIA's GKE
	// guide sets it so the GPU operator's plugin can run instead.
	gkeNoDevicePluginLabel = "gke-no-default-nvidia-gpu-device-plugin"
)

// gkeA2Shapes are the A2 machine types (A100 40GB), smallest first.
func gkeA2Shapes() []machine {
	return []machine{
		{instanceType: "a2-highgpu-1g", cpu: 12, memoryGiB: 85, gpus: 1, gpu: standin.GPUA100SXM40},
		{instanceType: "a2-highgpu-2g", cpu: 24, memoryGiB: 170, gpus: 2, gpu: standin.GPUA100SXM40},
		{instanceType: "a2-highgpu-4g", cpu: 48, memoryGiB: 340, gpus: 4, gpu: standin.GPUA100SXM40},
		{instanceType: "a2-highgpu-8g", cpu: 96, memoryGiB: 680, gpus: 8, gpu: standin.GPUA100SXM40},
		{instanceType: "a2-megagpu-16g", cpu: 96, memoryGiB: 1360, gpus: 16, gpu: standin.GPUA100SXM40},
	}
}

// gkeG2Shapes are the G2 machine types (L4), smallest first; Autopilot picks them for nvidia-l4.
func gkeG2Shapes() []machine {
	return []machine{
		{instanceType: "g2-standard-4", cpu: 4, memoryGiB: 16, gpus: 1, gpu: standin.GPUL4},
		{instanceType: "g2-standard-24", cpu: 24, memoryGiB: 96, gpus: 2, gpu: standin.GPUL4},
		{instanceType: "g2-standard-48", cpu: 48, memoryGiB: 192, gpus: 4, gpu: standin.GPUL4},
		{instanceType: "g2-standard-96", cpu: 96, memoryGiB: 384, gpus: 8, gpu: standin.GPUL4},
	}
}

// gkeFlavor is Google Kubernetes Engine: a Standard cluster with a default CPU pool and an A100 GPU
// pool on Container-Optimized OS, or with GKEAutopilot an Autopilot cluster whose GPU workloads land on
// auto-provisioned L4 nodes.
func gkeFlavor() Flavor {
	return Flavor{
		Name:        "gke",
		Description: "Google Kubernetes Engine (Standard, or Autopilot) on Container-Optimized OS",
		// GKE admits system-node-critical pods outside kube-system only with a ResourceQuota (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html).
		LimitCriticalPods: true,
		// GKE adds the GPU toleration to pods that request GPUs with ExtendedResourceToleration
		// (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus).
		AdmissionPlugins: []string{"ExtendedResourceToleration"},
		Nodes:            gkeNodes,
		CRDs:             gkeCRDs,
		Objects:          gkeObjects,
	}
}

// gkePools are the node pools of a GKE cluster: a Standard cluster's default and GPU pools, or an
// Autopilot cluster's auto-provisioned ones.
type gkePools struct {
	prefix, gpuPool, cpuPool string
	maxPods                  int64
	cpuShape, gpuShape       machine
	accelerator              string
	gpuTainted               bool
}

func gkePoolsFor(s Scenario) gkePools {
	prefix, gpuPool, cpuPool := "gke-", "gpu-pool", "default-pool"
	maxPods := int64(110)
	cpuShape := machine{instanceType: "e2-standard-4", cpu: 4, memoryGiB: 16}
	gpuShape := pickShape(gkeA2Shapes(), s.GPUsPerNode)
	accelerator := "nvidia-tesla-a100"
	// GKE taints GPU nodes nvidia.com/gpu=present:NoSchedule when the cluster also has non-GPU
	// nodes; a GPU-only Standard cluster comes up untainted (a community report, not in
	// https://cloud.google.com/kubernetes-engine/docs/how-to/gpus).
	gpuTainted := s.CPUNodes > 0
	if s.GKEAutopilot {
		// Autopilot: node names gk3-…, node auto-provisioned GPU pools (nap-…), 32 pods per
		// node, GPU nodes always tainted. Autopilot's general-purpose machine type (ek-standard)
		// and the nap pool naming are from memory of real clusters, not from a document.
		prefix, gpuPool, cpuPool = "gk3-", "nap-"+token("gke/nap", 8, base36Digits), "pool-2"
		maxPods = 32
		cpuShape = machine{instanceType: "ek-standard-8", cpu: 8, memoryGiB: 32}
		gpuShape = pickShape(gkeG2Shapes(), s.GPUsPerNode)
		accelerator = "nvidia-l4"
		gpuTainted = true
	}
	return gkePools{prefix, gpuPool, cpuPool, maxPods, cpuShape, gpuShape, accelerator, gpuTainted}
}

// gkeNodes are a Standard cluster's pools, or an Autopilot cluster's auto-provisioned nodes.
func gkeNodes(s Scenario) []SimNode {
	s = s.Defaults()
	p := gkePoolsFor(s)
	nodes := buildNodes(s, 0, func(r role, i int) nodeSpec { return gkeNode(s, p, r, i) })
	if s.GKEAutopilot {
		return nodes
	}
	// ExtraGPUNodes: a second GPU pool, l4-pool, of G2 machines (L4), as a cluster that shares its
	// smaller GPUs and not its A100s would have.
	l4 := p
	l4.gpuPool, l4.gpuShape, l4.accelerator = "l4-pool", pickShape(gkeG2Shapes(), s.GPUsPerNode), "nvidia-l4"
	for i := range s.ExtraGPUNodes {
		n := gkeNode(s, l4, gpuWorker, i)
		n.role = gpuWorker
		nodes = append(nodes, simNode(s, n))
	}
	return nodes
}

// gkeNode is the i-th node of role r.
func gkeNode(s Scenario, p gkePools, r role, i int) nodeSpec {
	// COS milestone 121 (GKE 1.33+): /etc/os-release ID=cos, VERSION_ID=121; containerd 2.0.
	cos := osRelease{image: "Container-Optimized OS from Google", kernel: "6.6.97+", id: "cos", versionID: "121"}
	pool, m := p.cpuPool, p.cpuShape
	if r == gpuWorker {
		pool, m = p.gpuPool, p.gpuShape
	}
	m.diskGiB, m.pods = 100, p.maxPods
	// gke-<cluster>-<pool>-<instance group hash>-<instance suffix>
	name := fmt.Sprintf("%s%s-%s-%s-%s", p.prefix, gkeCluster, pool,
		hexToken("gke/"+pool, 8), nodeSuffix("gke/"+pool, i, 4, base36Digits))
	labels := map[string]string{
		"cloud.google.com/gke-nodepool":          pool,
		"cloud.google.com/gke-os-distribution":   "cos",
		"cloud.google.com/gke-container-runtime": "containerd",
		"cloud.google.com/gke-boot-disk":         "pd-balanced",
		"cloud.google.com/gke-max-pods-per-node": fmt.Sprint(m.pods),
		"cloud.google.com/gke-provisioning":      "standard",
		"cloud.google.com/gke-stack-type":        "IPV4",
		"cloud.google.com/gke-logging-variant":   "DEFAULT",
		"cloud.google.com/gke-cpu-scaling-level": fmt.Sprint(m.cpu),
		"cloud.google.com/machine-family":        strings.SplitN(m.instanceType, "-", 2)[0],
		"cloud.google.com/private-node":          "false",
		"topology.gke.io/zone":                   gkeZone,
	}
	userLabels := "" // the pool's --node-labels, which GKE records on its nodes
	var taints []corev1.Taint
	if r == gpuWorker {
		labels["cloud.google.com/gke-accelerator"] = p.accelerator
		if s.GKEDevicePlugin {
			// GKE installs the driver (gpu-driver-version=default) and runs its plugin.
			labels["cloud.google.com/gke-gpu-driver-version"] = "default"
		} else {
			// NVIDIA's GKE guide: --node-labels gke-no-default-nvidia-gpu-device-plugin=true
			// and gpu-driver-version=disabled, which leaves no driver-version label.
			labels[gkeNoDevicePluginLabel] = "true"
			userLabels = gkeNoDevicePluginLabel + "=true"
		}
		if p.gpuTainted {
			taints = []corev1.Taint{noScheduleTaint(taintGPU, "present")}
		}
	}
	return nodeSpec{
		name:       name,
		machine:    m,
		os:         cos,
		runtime:    "containerd://2.0.6",
		kubelet:    s.KubeletVersion + gkeKubeletSuffix,
		providerID: fmt.Sprintf("gce://%s/%s/%s", gkeProject, gkeZone, name),
		region:     gkeRegion,
		zone:       gkeZone,
		labels:     labels,
		taints:     taints,
		annotations: map[string]string{
			"container.googleapis.com/instance_id": "7" + token(name+"/instance", 18, "0123456789"),
			"csi.volume.kubernetes.io/nodeid": jsonString(map[string]string{
				"pd.csi.storage.gke.io": fmt.Sprintf("projects/%s/zones/%s/instances/%s", gkeProject, gkeZone, name),
			}),
			"node.gke.io/last-applied-node-labels": userLabels,
		},
		reserved: gkeReserved(m),
	}
}

// gkeCRDs are the API groups GKE serves.
func gkeCRDs() []apiextensionsv1.CustomResourceDefinition {
	return newCRDs(append(snapshotCRDs(),
		crdSpec{"networking.gke.io", "v1", "ManagedCertificate", "managedcertificates", false},
		crdSpec{"networking.gke.io", "v1beta1", "FrontendConfig", "frontendconfigs", false},
		crdSpec{"cloud.google.com", "v1", "BackendConfig", "backendconfigs", false},
		crdSpec{"cloud.google.com", "v1", "ComputeClass", "computeclasses", true},
		// Google Cloud Managed Service for Prometheus, on by default since GKE 1.27.
		crdSpec{"monitoring.googleapis.com", "v1", "PodMonitoring", "podmonitorings", false},
		crdSpec{"monitoring.googleapis.com", "v1", "ClusterPodMonitoring", "clusterpodmonitorings", true},
	)...)
}

// gkeObjects are kube-system's critical-pods quota, Autopilot's allowlist CRDs and GKE's device plugins.
func gkeObjects(s Scenario) []unstructured.Unstructured {
	s = s.Defaults()
	// GKE admits system-node-critical and system-cluster-critical pods only where a quota
	// allows them; kube-system has this one (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html: other namespaces need their own).
	objs := []unstructured.Unstructured{object("v1", "ResourceQuota", "kube-system", "gcp-critical-pods", map[string]any{
		"spec": map[string]any{
			"hard": map[string]any{"pods": "1G"},
			"scopeSelector": map[string]any{"matchExpressions": []any{map[string]any{
				"operator": "In", "scopeName": "PriorityClass",
				"values": []any{"system-node-critical", "system-cluster-critical"},
			}}},
		},
	})}
	if s.GKEAutopilot {
		// Autopilot's workload allowlists (partner workloads). The Flavor contract has no
		// per-scenario CRDs, so these CRDs come as objects.
		for _, c := range []crdSpec{
			{"auto.gke.io", "v1", "AllowlistedWorkload", "allowlistedworkloads", true},
			{"auto.gke.io", "v1", "AllowlistedV2Workload", "allowlistedv2workloads", true},
			{"auto.gke.io", "v1", "WorkloadAllowlist", "workloadallowlists", true},
			{"auto.gke.io", "v1", "AllowlistSynchronizer", "allowlistsynchronizers", true},
		} {
			crd := newCRD(c)
			objs = append(objs, typedObject(&crd))
		}
	}
	if s.GKEDevicePlugin {
		objs = append(objs, gkeDevicePlugins()...)
	}
	return objs
}

// gkeDevicePlugins are GKE's NVIDIA device plugin DaemonSets in kube-system. Every GKE cluster has six,
// by size and node image (nvidia-gpu-device-plugin-{small,medium,large}-{cos,ubuntu}, seen in
// `kubectl get ds -n kube-system` dumps), most with nothing scheduled; each runs only on GPU nodes
// without the opt-out label. How GKE picks the size variant for a node is not documented; the sandbox
// picks it by machine type (1–2 GPUs small, 4 medium, 8 or more large).
func gkeDevicePlugins() []unstructured.Unstructured {
	sizes := map[string][]string{}
	for _, m := range append(gkeA2Shapes(), gkeG2Shapes()...) {
		size := "small"
		switch {
		case m.gpus >= 8:
			size = "large"
		case m.gpus >= 4:
			size = "medium"
		}
		sizes[size] = append(sizes[size], m.instanceType)
	}
	var objs []unstructured.Unstructured
	for _, size := range []string{"small", "medium", "large"} {
		for _, image := range []string{"cos", "ubuntu"} {
			objs = append(objs, gkeDevicePluginDaemonSet(size, image, sizes[size]))
		}
	}
	return objs
}

// gkeDevicePluginDaemonSet is the device plugin DaemonSet of one size (by GPU count) and node image.
func gkeDevicePluginDaemonSet(size, image string, instanceTypes []string) unstructured.Unstructured {
	hostPath := func(name, path string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}
	}
	name := "nvidia-gpu-device-plugin-" + size + "-" + image
	labels := map[string]string{"k8s-app": "nvidia-gpu-device-plugin", "addonmanager.kubernetes.io/mode": "Reconcile"}
	// Six DaemonSets must not select each other's pods; the variant label is the sandbox's.
	podLabels := map[string]string{"k8s-app": "nvidia-gpu-device-plugin", "nvidia-gpu-device-plugin/variant": size + "-" + image}
	return typedObject(&appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: podLabels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					PriorityClassName: "system-node-critical",
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
							MatchExpressions: []corev1.NodeSelectorRequirement{
								{Key: "cloud.google.com/gke-accelerator", Operator: corev1.NodeSelectorOpExists},
								{Key: "cloud.google.com/gke-os-distribution", Operator: corev1.NodeSelectorOpIn, Values: []string{image}},
								{Key: "node.kubernetes.io/instance-type", Operator: corev1.NodeSelectorOpIn, Values: instanceTypes},
								{Key: gkeNoDevicePluginLabel, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"true"}},
							},
						}}},
					}},
					// Tolerates every taint, so also nvidia.com/gpu.
					Tolerations: []corev1.Toleration{
						{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
						{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
					},
					Containers: []corev1.Container{gkeDevicePluginContainer()},
					Volumes: []corev1.Volume{
						hostPath("device-plugin", "/var/lib/kubelet/device-plugins"),
						hostPath("dev", "/dev"),
						// Where GKE's driver installer puts the driver.
						hostPath("nvidia", "/home/kubernetes/bin/nvidia"),
						hostPath("pod-resources", "/var/lib/kubelet/pod-resources"),
						hostPath("proc", "/proc"),
					},
				},
			},
		},
	})
}

// gkeDevicePluginContainer is the plugin container every variant runs.
func gkeDevicePluginContainer() corev1.Container {
	privileged := true
	return corev1.Container{
		Name: "nvidia-gpu-device-plugin",
		// GKE pins the image by digest; this one is made up.
		Image:   "gke.gcr.io/nvidia-gpu-device-plugin@sha256:" + hexToken("gke/device-plugin", 64),
		Command: []string{"/usr/bin/nvidia-gpu-device-plugin", "-logtostderr", "--enable-container-gpu-metrics"},
		Ports:   []corev1.ContainerPort{{Name: "metrics", ContainerPort: 2112}},
		Env: []corev1.EnvVar{
			{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			{Name: "LD_LIBRARY_PATH", Value: "/usr/local/nvidia/lib64"},
		},
		// What a running small-cos pod requests in `kubectl describe node` dumps.
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("150m"), corev1.ResourceMemory: resource.MustParse("80Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("80Mi")},
		},
		SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "device-plugin", MountPath: "/device-plugin"},
			{Name: "dev", MountPath: "/dev"},
			{Name: "nvidia", MountPath: "/usr/local/nvidia"},
			{Name: "pod-resources", MountPath: "/var/lib/kubelet/pod-resources"},
			{Name: "proc", MountPath: "/proc"},
		},
	}
}
