package plan

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/distro"
)

// DRASource is the values layer --dra adds to the operator release.
const DRASource = "--dra"

// GPUClusterName is the GPUCluster our chart renders with gpuCluster.deployCR (and NVIDIA's does): the
// CRD allows no other name (api/nvidia/v1alpha1/gpucluster_types.go at v26.7.0).
const GPUClusterName = "gpu-cluster"

// draMinKubernetes is the first Kubernetes release with Dynamic Resource Allocation GA
// (resource.k8s.io/v1, https://kubernetes.io/blog/2025/09/01/kubernetes-v1-34-dra-updates/).
const draMinKubernetes = "1.34"

// draMinOperator is the first GPU Operator release whose chart and controller have the GPUCluster
// (deployments/gpu-operator/templates/gpucluster.yaml, new in v26.7.0; v26.3.3 and v25.10.1 have none).
const draMinOperator = "26.7"

// DRAError is a --dra the plan refuses: the cluster or the release cannot run the DRA stack, or the
// other inputs contradict it. It is a mistake in the inputs (errors.Is ErrInput), found before any write.
type DRAError struct {
	// Reason is the one-line why, without the "--dra: " prefix.
	Reason string
}

func (e *DRAError) Error() string { return "--dra: " + e.Reason }

// Unwrap makes a DRAError an ErrInput.
func (e *DRAError) Unwrap() error { return ErrInput }

// refuseDRA judges --dra against the cluster and the operator release before anything is planned.
func (b *builder) refuseDRA() error {
	if !b.o.DRA {
		return nil
	}
	if distro.Get(b.p.Distribution).OLM {
		return &DRAError{"on OpenShift gpuctl installs NVIDIA's certified operator through OLM, whose ClusterPolicy has no DRA stack; drop --dra"}
	}
	kv := b.det.KubernetesVersion
	if kv == "" {
		return &DRAError{"gpuctl cannot tell the API server's Kubernetes version, and DRA needs " + draMinKubernetes + " or newer (resource.k8s.io/v1)"}
	}
	if _, err := semver.NewVersion(kv); err != nil {
		return &DRAError{fmt.Sprintf("cannot read the API server's Kubernetes version %q, and DRA needs %s or newer", kv, draMinKubernetes)}
	}
	if !since(kv, draMinKubernetes) {
		return &DRAError{fmt.Sprintf("the API server runs Kubernetes %s and DRA needs %s or newer (resource.k8s.io/v1 is GA from 1.34); upgrade the cluster, or install without --dra", kv, draMinKubernetes)}
	}
	// The version says DRA is GA; whether the API server serves it is discovery's to say (a cluster can
	// turn the group off with --runtime-config). Unknown when discovery was refused: then the version
	// stands.
	if api := b.det.ResourceAPI; api != nil && !api.Serves("v1") {
		served := "not the group at all"
		if len(api.Versions) > 0 {
			served = "only " + strings.Join(api.Versions, ", ")
		}
		return &DRAError{fmt.Sprintf("the API server does not serve %s/v1 (it serves %s), which NVIDIA's DRA driver and GPUCluster need; turn the API on (kube-apiserver --runtime-config=%s/v1=true), or install without --dra", detect.ResourceGroup, served, detect.ResourceGroup)}
	}
	if err := refuseDRASharing(b.o.Sharing); err != nil {
		return err
	}
	return refuseDRARelease(b.in.Charts[OperatorRelease].AppVersion)
}

// refuseDRASharing refuses --sharing with --dra: time-slicing and MPS are the device plugin's, which
// the DRA stack turns off. Under DRA a GPU is shared by the claims themselves (a ResourceClaim's
// opaque GpuConfig sharing strategy, https://github.com/NVIDIA/k8s-dra-driver-gpu).
func refuseDRASharing(sharing []string) error {
	if len(sharing) == 0 || (len(sharing) == 1 && sharing[0] == SharingNone) {
		return nil
	}
	return &DRAError{"--sharing shares GPUs through the device plugin, which the DRA stack turns off (under DRA a ResourceClaim asks for time-slicing or MPS itself): drop one of them"}
}

// refuseDRARelease refuses an operator release without the GPUCluster.
func refuseDRARelease(op string) error {
	if !since(op, draMinOperator) {
		return &DRAError{"GPU Operator " + op + " has no GPUCluster, the operator's DRA stack (new in v26.7.0); use --operator-version v26.7.0, or NVIDIA's DRA driver chart next to the operator (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/dra-intro-install.html)"}
	}
	return nil
}

// CheckDRAInputs judges --dra on what needs no cluster, before gpuctl takes its lock: the operator
// release, the user's own operator values (-f and --set merged) and --sharing. Build judges the same again, and
// the cluster's Kubernetes version besides.
func CheckDRAInputs(operatorVersion string, user map[string]any, sharing []string) error {
	if err := refuseDRARelease(operatorVersion); err != nil {
		return err
	}
	if err := refuseDRASharing(sharing); err != nil {
		return err
	}
	return refuseDRAValues(user)
}

// draValues is the layer --dra adds: the GPUCluster instead of the ClusterPolicy (NVIDIA's chart
// refuses both, templates/validations.yaml at v26.7.0), the driver by an NVIDIADriver, as a GPUCluster
// manages neither the driver nor a device plugin (api/nvidia/v1alpha1/gpucluster_types.go at v26.7.0),
// and the device plugin off, which the DRA driver replaces. There is no CDI value to set: the GPUCluster
// has no toolkit, and the DRA driver writes its own CDI specs.
func draValues() map[string]any {
	v := map[string]any{}
	set(v, true, "gpuCluster", "deployCR")
	set(v, false, "clusterPolicy", "deployCR")
	set(v, true, "driver", "nvidiaDriverCRD", "enabled")
	set(v, false, "devicePlugin", "enabled")
	// ComputeDomains (multi-node NVLink) need NVIDIA's resource.nvidia.com ComputeDomain CRDs, which
	// gpuctl does not apply (charts/gpu-operator/Chart.yaml); v26.7.0's chart turns them on by default.
	set(v, false, "draDriver", "computeDomains", "enabled")
	return normalized(v)
}

// refuseDRAValues refuses user values that bring back what --dra turns off.
func refuseDRAValues(op map[string]any) error {
	if at(op, "devicePlugin", "enabled") == true {
		return &DRAError{"the values ask for the device plugin (devicePlugin.enabled=true), which the DRA stack replaces: drop one of them"}
	}
	if at(op, "draDriver", "computeDomains", "enabled") == true {
		return &DRAError{"the values ask for ComputeDomains (draDriver.computeDomains.enabled=true), whose resource.nvidia.com CRDs gpuctl does not apply: drop it"}
	}
	if at(op, "clusterPolicy", "deployCR") == true || at(op, "gpuCluster", "deployCR") == false {
		// A user's value; draValues sets both the other way.
		return &DRAError{"the values ask for the ClusterPolicy (clusterPolicy.deployCR=true or gpuCluster.deployCR=false), and the operator runs no GPUCluster next to one: drop one of them"}
	}
	return nil
}

// DRADriverName is the driver of NVIDIA's DRA driver for GPUs: its DeviceClass gpu.nvidia.com selects
// devices of this driver, and its kubelet plugin publishes ResourceSlices under it
// (manifests/state-dra-driver/0400_deviceclass-gpu.yaml at v26.7.0).
const DRADriverName = "gpu.nvidia.com"
