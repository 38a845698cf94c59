package olm

import (
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuctl/gpuctl/internal/bundle"
)

// olmBundleStrategy is the install strategy of the bundles the stand-in knows, modelled on the real
// bundles; any other package installs nothing.
func olmBundleStrategy(pkg, version string) olmStrategy {
	// The stand-in grants everything: the real bundles list exact clusterPermissions (for the GPU
	// operator, the ClusterRole of NVIDIA/gpu-operator deployments/gpu-operator/templates/clusterrole.yaml@v26.7.0), which gpuctl does not author.
	everything := []rbacv1.PolicyRule{
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		{NonResourceURLs: []string{"*"}, Verbs: []string{"*"}},
	}
	runAnywhere := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	switch pkg {
	case "gpu-operator-certified":
		return gpuOperatorBundleStrategy(version, everything, runAnywhere)
	case "nfd":
		return nfdOperatorBundleStrategy(version, everything, runAnywhere)
	}
	return olmStrategy{}
}

// gpuOperatorBundleStrategy follows bundle/<version>/manifests/gpu-operator-certified.clusterserviceversion.yaml
// of NVIDIA/gpu-operator (v25.3.0 read from the module cache): Deployment gpu-operator, labels app and
// app.kubernetes.io/component gpu-operator, SA gpu-operator, command gpu-operator --leader-elect, and
// the operand images as <COMPONENT>_IMAGE variables, because the ClusterPolicy from alm-examples sets
// no images (imagePath() in NVIDIA/gpu-operator api/nvidia/v1/clusterpolicy_types.go@v26.7.0; NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst). The real CSV pins digests; the stand-in uses the tags of
// NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0 for v26.7.0 (the operator's own image follows the CSV version).
func gpuOperatorBundleStrategy(version string, rules []rbacv1.PolicyRule, tolerations []corev1.Toleration) olmStrategy {
	tag := "v" + strings.TrimPrefix(version, "v")
	selector := map[string]string{"app": "gpu-operator", "app.kubernetes.io/component": "gpu-operator"}
	podLabels := maps.Clone(selector)
	podLabels["nvidia.com/gpu-driver-upgrade-drain.skip"] = "true"
	env := OperatorImageEnv(tag)
	return olmStrategy{
		ClusterPermissions: []olmPermission{{ServiceAccountName: "gpu-operator", Rules: rules}},
		Deployments: []olmStrategyDeployment{{
			Name: "gpu-operator",
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: selector},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
					Spec: corev1.PodSpec{
						ServiceAccountName: "gpu-operator",
						PriorityClassName:  "system-node-critical",
						Tolerations:        tolerations,
						Containers: []corev1.Container{{
							Name:    "gpu-operator",
							Image:   "nvcr.io/nvidia/gpu-operator:" + tag,
							Command: []string{"gpu-operator"},
							Args:    []string{"--leader-elect", "--leader-lease-renew-deadline", "60s"},
							Env:     env,
						}},
					},
				},
			},
		}},
	}
}

// operatorImageEnv is the operator container's environment in NVIDIA's bundle: its namespace, and the
// operand images as <COMPONENT>_IMAGE variables, which the operator falls back to for images a
// ClusterPolicy leaves unset (imagePath() in NVIDIA/gpu-operator api/nvidia/v1/clusterpolicy_types.go@v26.7.0). tag is the operator's own image tag; the operand images
// are those gpuctl's catalog pins for that release (gpuctl's default release's for another tag).
func OperatorImageEnv(tag string) []corev1.EnvVar {
	env := []corev1.EnvVar{{
		Name:      "OPERATOR_NAMESPACE",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
	}}
	b, err := bundle.Get(tag)
	if err != nil {
		b = bundle.Default()
	}
	env = append(env, corev1.EnvVar{Name: "VALIDATOR_IMAGE", Value: "nvcr.io/nvidia/gpu-operator:" + tag})
	for _, kv := range [][2]string{
		{"GFD_IMAGE", "gfd"},
		{"CONTAINER_TOOLKIT_IMAGE", "toolkit"},
		{"DCGM_IMAGE", "dcgm"},
		{"DCGM_EXPORTER_IMAGE", "dcgmExporter"},
		{"DEVICE_PLUGIN_IMAGE", "devicePlugin"},
		{"DRIVER_IMAGE", "driver"},
		{"DRIVER_MANAGER_IMAGE", "driverManager"},
		{"MIG_MANAGER_IMAGE", "migManager"},
		{"VFIO_MANAGER_IMAGE", "vfioManager"},
		{"SANDBOX_DEVICE_PLUGIN_IMAGE", "sandboxDevicePlugin"},
		{"VGPU_DEVICE_MANAGER_IMAGE", "vgpuDeviceManager"},
		{"GDS_IMAGE", "gds"},
		{"GDRCOPY_IMAGE", "gdrcopy"},
		{"CC_MANAGER_IMAGE", "ccManager"},
	} {
		if img, ok := b.Images[kv[1]]; ok {
			env = append(env, corev1.EnvVar{Name: kv[0], Value: img.String()})
		}
	}
	// Up to v25.10 the CSV also names the CUDA base image, which the controller's OpenShift transform of
	// dcgm-exporter requires (NVIDIA/gpu-operator
	// bundle/manifests/gpu-operator-certified.clusterserviceversion.yaml@v25.10.1: CUDA_BASE_IMAGE).
	if img, ok := b.Images["vfioManager"]; ok && img.Image == "cuda" {
		env = append(env, corev1.EnvVar{Name: "CUDA_BASE_IMAGE", Value: img.String()})
	}
	return env
}

// nfdOperatorBundleStrategy follows Red Hat's nfd bundle: Deployment nfd-controller-manager running
// the operator, which takes its operand image from NODE_FEATURE_DISCOVERY_IMAGE. Image tags follow
// the CSV's OpenShift minor version (4.19.0-… → v4.19).
func nfdOperatorBundleStrategy(version string, rules []rbacv1.PolicyRule, tolerations []corev1.Toleration) olmStrategy {
	tag := "v4.19"
	if parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3); len(parts) >= 2 {
		tag = "v" + parts[0] + "." + parts[1]
	}
	podLabels := map[string]string{"control-plane": "controller-manager"}
	return olmStrategy{
		ClusterPermissions: []olmPermission{{ServiceAccountName: "nfd-manager", Rules: rules}},
		Deployments: []olmStrategyDeployment{{
			Name: nfdOperatorDeployment,
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: podLabels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
					Spec: corev1.PodSpec{
						ServiceAccountName: "nfd-manager",
						Tolerations:        tolerations,
						Containers: []corev1.Container{{
							Name:    "manager",
							Image:   "registry.redhat.io/openshift4/ose-cluster-nfd-operator-rhel9:" + tag,
							Command: []string{"/node-feature-discovery-operator"},
							Args:    []string{"--leader-elect"},
							Env: []corev1.EnvVar{
								{Name: "OPERATOR_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
								{Name: nfdOperandImageEnv, Value: "registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:" + tag},
							},
						}},
					},
				},
			},
		}},
	}
}
