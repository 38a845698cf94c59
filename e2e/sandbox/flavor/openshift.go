package flavor

import (
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/bundle"
)

// openshiftRelease is the OpenShift release whose kubelets run the scenario's Kubernetes version, and
// what its RHCOS nodes report.
type openshiftRelease struct {
	minor   int    // the 4.<minor> stream
	version string // the release, e.g. "4.24.5"
	os      osRelease
	kubelet string // nodeInfo.kubeletVersion
	crio    string // nodeInfo.containerRuntimeVersion
}

// openshiftReleaseFor maps the scenario's Kubernetes minor to an OpenShift minor (4.18 ships
// Kubernetes 1.31, and each OpenShift minor moves one Kubernetes minor) and describes its nodes.
// Node facts from `oc get nodes -o wide` dumps (public repositories, 2025–2026):
//
//   - up to 4.18 RHCOS has its own versions: osImage "Red Hat Enterprise Linux CoreOS
//     418.94.202503102036-0", /etc/os-release ID=rhcos, VERSION_ID=4.18, OSTREE_VERSION=418.94.…;
//   - from 4.19 RHCOS is built on RHEL 9.6: osImage "Red Hat Enterprise Linux CoreOS 9.6.20250715-0
//     (Plow)", OSTREE_VERSION=9.6.20250715-0, and os-release (so NFD's system-os_release.ID and MCO's
//     node.openshift.io/os_id) say ID=rhel, VERSION_ID=9.6 — seen on 4.21 nodes, assumed for
//     4.19–4.20 and for later releases, which may move to a newer RHEL;
//   - kubelets report "+<git hash>" versions (v1.23.5+70fb84c, replicatedhq/troubleshoot pkg/analyze/distribution.go) up to about 4.16; 4.18 and
//     later report plain versions (v1.31.6, v1.32.6, v1.34.2);
//   - CRI-O's version follows Kubernetes': cri-o://1.31.6-2.rhaos4.18.gitda737c9.el9.
func openshiftReleaseFor(s Scenario) openshiftRelease {
	kubeMinor, patch := s.kubeMinor(), s.kubePatch()
	minor := kubeMinor - 13
	r := openshiftRelease{
		minor:   minor,
		version: fmt.Sprintf("4.%d.5", minor),
		kubelet: s.KubeletVersion,
		crio:    fmt.Sprintf("cri-o://1.%d.%d-3.rhaos4.%d.git%s.el9", kubeMinor, patch, minor, hexToken(fmt.Sprint("crio", minor), 7)),
	}
	if minor <= 16 {
		r.kubelet += "+" + hexToken("openshift/kubelet/"+s.KubeletVersion, 7)
	}
	if minor >= 19 {
		ostree := "9.6.20250715-0"
		r.os = osRelease{
			image:  "Red Hat Enterprise Linux CoreOS " + ostree + " (Plow)",
			kernel: "5.14.0-570.27.1.el9_6.x86_64",
			id:     "rhel", versionID: "9.6", ostreeVersion: ostree,
		}
	} else {
		ostree := fmt.Sprintf("4%d.94.202503102036-0", minor)
		r.os = osRelease{
			image:  "Red Hat Enterprise Linux CoreOS " + ostree,
			kernel: "5.14.0-427.60.1.el9_4.x86_64",
			id:     "rhcos", versionID: fmt.Sprintf("4.%d", minor), ostreeVersion: ostree,
		}
	}
	return r
}

// The simulated cluster's AWS region and the installer's infrastructure name (<cluster>-<5 random>).
const (
	openshiftRegion    = "us-east-2"
	openshiftInfraName = "sandbox-7xk2p"
)

// openshiftFlavor is OpenShift Container Platform installed by the installer on AWS (IPI): masters
// tainted node-role.kubernetes.io/master:NoSchedule, RHCOS workers on CRI-O, the cluster-scoped
// ClusterVersion the GPU operator reads its OpenShift version from, OLM with its catalogs, and the
// API groups the GPU operator uses on OpenShift (config, security and image.openshift.io and
// monitoring.coreos.com: the real operator, run against the sandbox, reads ClusterVersion and ImageStreams, manages
// SCCs and stops with "no matches for kind PrometheusRule" without monitoring.coreos.com). Only one master is simulated (real clusters have
// three). Its node names and provider IDs look like EKS's: detection must key on the API groups.
func openshiftFlavor() Flavor {
	return Flavor{
		Name:        "openshift",
		Description: "Red Hat OpenShift Container Platform on AWS, RHCOS nodes with CRI-O",
		Nodes:       openshiftNodes,
		CRDs:        openshiftCRDs,
		Objects: func(s Scenario) []unstructured.Unstructured {
			rel := openshiftReleaseFor(s.Defaults())
			return openshiftObjects(rel, openshiftRegion, openshiftInfraName, s.operatorVersion)
		},
	}
}

// openshiftNodes are one master and RHCOS workers on AWS, named as the installer names them.
func openshiftNodes(s Scenario) []SimNode {
	s = s.Defaults()
	rel := openshiftReleaseFor(s)
	return buildNodes(s, 1, func(r role, i int) nodeSpec {
		zone := openshiftRegion + string("abc"[i%3])
		pool, subnet := "worker", "10.0.64.0"
		m := machine{instanceType: "m6i.2xlarge", cpu: 8, memoryGiB: 32}
		machineName := fmt.Sprintf("%s-worker-%s-%s", openshiftInfraName, zone, nodeSuffix(openshiftInfraName+"/worker", i, 5, base36Digits))
		labels := map[string]string{"node-role.kubernetes.io/worker": "", "node.openshift.io/os_id": rel.os.id}
		var n nodeSpec
		switch r {
		case controlPlane:
			pool, subnet = "master", "10.0.0.0"
			m = machine{instanceType: "m6i.xlarge", cpu: 4, memoryGiB: 16}
			machineName = fmt.Sprintf("%s-master-%d", openshiftInfraName, i)
			labels = map[string]string{
				"node-role.kubernetes.io/master":        "",
				"node-role.kubernetes.io/control-plane": "",
				"node.openshift.io/os_id":               rel.os.id,
			}
			n.taints = append(n.taints, noScheduleTaint("node-role.kubernetes.io/master", ""))
		case gpuWorker:
			subnet = "10.0.32.0"
			m = pickShape(awsGPUShapes(), s.GPUsPerNode)
			machineName = fmt.Sprintf("%s-worker-gpu-%s-%s", openshiftInfraName, zone, nodeSuffix(openshiftInfraName+"/worker-gpu", i, 5, base36Digits))
		}
		m.diskGiB, m.pods = 120, 250 // OpenShift's default root volume and maxPods
		ip := ipv4(subnet, 20+37*i)
		n.name = "ip-" + strings.ReplaceAll(ip, ".", "-") + "." + openshiftRegion + ".compute.internal"
		instanceID := "i-0" + hexToken(n.name+"/instance", 16)
		n.machine, n.os, n.runtime, n.kubelet = m, rel.os, rel.crio, rel.kubelet
		n.providerID = fmt.Sprintf("aws:///%s/%s", zone, instanceID)
		n.systemUUID = ec2UUID(n.name)
		n.region, n.zone = openshiftRegion, zone
		n.labels = labels
		rendered := "rendered-" + pool + "-" + hexToken("openshift/mc/"+pool, 32)
		n.annotations = map[string]string{
			"machine.openshift.io/machine":                           "openshift-machine-api/" + machineName,
			"machineconfiguration.openshift.io/controlPlaneTopology": "HighlyAvailable",
			"machineconfiguration.openshift.io/currentConfig":        rendered,
			"machineconfiguration.openshift.io/desiredConfig":        rendered,
			"machineconfiguration.openshift.io/state":                "Done",
			"machineconfiguration.openshift.io/reason":               "",
			"csi.volume.kubernetes.io/nodeid":                        jsonString(map[string]string{"ebs.csi.aws.com": instanceID}),
		}
		// OpenShift's default system-reserved: 500m CPU and 1Gi memory.
		n.reserved = reserved{cpuMilli: 500, memoryMiB: 1024}
		return n
	})
}

// openshiftCRDs are the API groups OpenShift serves that the GPU operator and gpuctl look at.
func openshiftCRDs() []apiextensionsv1.CustomResourceDefinition {
	// config.openshift.io, security.openshift.io, monitoring.coreos.com and the OLM groups are
	// CRDs on OpenShift too. image, route and apps.openshift.io are served by the
	// openshift-apiserver, and packages.operators.coreos.com by OLM's package server, as
	// aggregated APIs; here CRDs stand in for them. nfd.openshift.io appears only once the NFD
	// Operator is installed from OperatorHub; the sandbox has no OLM to install it, so it serves
	// the NFD Operator's API from the start.
	return newCRDs(
		crdSpec{"config.openshift.io", "v1", "ClusterVersion", "clusterversions", true},
		crdSpec{"config.openshift.io", "v1", "Proxy", "proxies", true},
		crdSpec{"config.openshift.io", "v1", "Infrastructure", "infrastructures", true},
		crdSpec{"security.openshift.io", "v1", "SecurityContextConstraints", "securitycontextconstraints", true},
		crdSpec{"image.openshift.io", "v1", "ImageStream", "imagestreams", false},
		crdSpec{"route.openshift.io", "v1", "Route", "routes", false},
		crdSpec{"apps.openshift.io", "v1", "DeploymentConfig", "deploymentconfigs", false},
		crdSpec{"monitoring.coreos.com", "v1", "PrometheusRule", "prometheusrules", false},
		crdSpec{"monitoring.coreos.com", "v1", "ServiceMonitor", "servicemonitors", false},
		crdSpec{"monitoring.coreos.com", "v1", "PodMonitor", "podmonitors", false},
		crdSpec{"operators.coreos.com", "v1alpha1", "Subscription", "subscriptions", false},
		crdSpec{"operators.coreos.com", "v1alpha1", "InstallPlan", "installplans", false},
		crdSpec{"operators.coreos.com", "v1alpha1", "ClusterServiceVersion", "clusterserviceversions", false},
		crdSpec{"operators.coreos.com", "v1alpha1", "CatalogSource", "catalogsources", false},
		crdSpec{"operators.coreos.com", "v1", "OperatorGroup", "operatorgroups", false},
		crdSpec{"operators.coreos.com", "v2", "OperatorCondition", "operatorconditions", false},
		crdSpec{"packages.operators.coreos.com", "v1", "PackageManifest", "packagemanifests", false},
		crdSpec{"nfd.openshift.io", "v1", "NodeFeatureDiscovery", "nodefeaturediscoveries", false},
		crdSpec{"nfd.openshift.io", "v1alpha1", "NodeFeatureRule", "nodefeaturerules", false},
	)
}

// Fixed times for status fields, so objects are the same on every run.
const (
	openshiftInstallStarted   = "2026-01-05T10:02:41Z"
	openshiftInstallCompleted = "2026-01-05T10:41:17Z"
)

// openshiftObjects are what a freshly installed cluster has that the GPU stack looks at.
// operatorVersion is the GPU operator release whose channel is the package's default ("" for gpuctl's
// default release).
func openshiftObjects(rel openshiftRelease, region, infraName, operatorVersion string) []unstructured.Unstructured {
	objs := openshiftNamespaces()
	objs = append(objs, openshiftClusterVersion(rel))
	objs = append(objs, openshiftInfrastructure(region, infraName)...)
	objs = append(objs, openshiftSCCs()...)
	objs = append(objs, openshiftDriverToolkit(rel))
	objs = append(objs, openshiftCatalogs(rel)...)
	return append(objs, gpuOperatorPackage(operatorVersion), nfdPackage(rel))
}

// openshiftNamespaces are the platform's namespaces the GPU stack meets.
func openshiftNamespaces() []unstructured.Unstructured {
	monitored := map[string]string{"openshift.io/cluster-monitoring": "true"}
	return []unstructured.Unstructured{
		namespaceObject("openshift", nil),
		namespaceObject("openshift-config", nil),
		namespaceObject("openshift-machine-api", monitored),
		namespaceObject("openshift-monitoring", monitored),
		namespaceObject("openshift-marketplace", monitored),
		namespaceObject("openshift-operator-lifecycle-manager", monitored),
		namespaceObject("openshift-operators", map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}),
	}
}

// openshiftClusterVersion is the ClusterVersion of a cluster installed at rel.
func openshiftClusterVersion(rel openshiftRelease) unstructured.Unstructured {
	// The GPU operator takes the OpenShift version from the first Completed entry of status.history
	// (controllers/clusterinfo getOpenshiftVersion).
	releaseImage := "quay.io/openshift-release-dev/ocp-release@sha256:" + hexToken("ocp-release/"+rel.version, 64)
	channel := fmt.Sprintf("stable-4.%d", rel.minor)
	condition := func(kind, status, message string) map[string]any {
		return map[string]any{"type": kind, "status": status, "lastTransitionTime": openshiftInstallCompleted, "message": message}
	}
	return object("config.openshift.io/v1", "ClusterVersion", "", "version", map[string]any{
		"spec": map[string]any{"channel": channel, "clusterID": uuidToken("openshift/cluster-id")},
		"status": map[string]any{
			"desired": map[string]any{
				"version":  rel.version,
				"image":    releaseImage,
				"channels": []string{fmt.Sprintf("candidate-4.%d", rel.minor), fmt.Sprintf("fast-4.%d", rel.minor), channel},
			},
			"history": []any{map[string]any{
				"state":          "Completed",
				"version":        rel.version,
				"image":          releaseImage,
				"startedTime":    openshiftInstallStarted,
				"completionTime": openshiftInstallCompleted,
				"verified":       false,
			}},
			"observedGeneration": 1,
			"versionHash":        token("openshift/version-hash", 11, base36Digits+"ABCDEFGHIJKLMNOPQRSTUVWXYZ-_") + "=",
			"availableUpdates":   nil,
			"conditions": []any{
				condition("Available", "True", "Done applying "+rel.version),
				condition("Failing", "False", ""),
				condition("Progressing", "False", "Cluster version is "+rel.version),
				condition("RetrievedUpdates", "True", ""),
			},
		},
	})
}

// openshiftInfrastructure are the cluster's Proxy and Infrastructure (AWS, in region).
func openshiftInfrastructure(region, infraName string) []unstructured.Unstructured {
	return []unstructured.Unstructured{
		object("config.openshift.io/v1", "Proxy", "", "cluster", map[string]any{"spec": map[string]any{"trustedCA": map[string]any{"name": ""}}}),
		object("config.openshift.io/v1", "Infrastructure", "", "cluster", map[string]any{
			"spec": map[string]any{"cloudConfig": map[string]any{"name": ""}, "platformSpec": map[string]any{"type": "AWS", "aws": map[string]any{}}},
			"status": map[string]any{
				"infrastructureName":     infraName,
				"platform":               "AWS",
				"platformStatus":         map[string]any{"type": "AWS", "aws": map[string]any{"region": region}},
				"apiServerURL":           "https://api.sandbox.gpuctl.example:6443",
				"apiServerInternalURI":   "https://api-int.sandbox.gpuctl.example:6443",
				"controlPlaneTopology":   "HighlyAvailable",
				"infrastructureTopology": "HighlyAvailable",
				"cpuPartitioning":        "None",
			},
		}),
	}
}

// openshiftSCCs are two of the default SecurityContextConstraints; SCC fields sit at the top level,
// not in a spec.
func openshiftSCCs() []unstructured.Unstructured {
	return []unstructured.Unstructured{
		object("security.openshift.io/v1", "SecurityContextConstraints", "", "privileged", map[string]any{
			"allowHostDirVolumePlugin": true, "allowHostIPC": true, "allowHostNetwork": true, "allowHostPID": true,
			"allowHostPorts": true, "allowPrivilegeEscalation": true, "allowPrivilegedContainer": true,
			"allowedCapabilities": []string{"*"}, "allowedUnsafeSysctls": []string{"*"},
			"fsGroup": map[string]any{"type": "RunAsAny"}, "runAsUser": map[string]any{"type": "RunAsAny"},
			"seLinuxContext": map[string]any{"type": "RunAsAny"}, "supplementalGroups": map[string]any{"type": "RunAsAny"},
			"seccompProfiles": []string{"*"}, "readOnlyRootFilesystem": false, "volumes": []string{"*"},
			"groups": []string{"system:cluster-admins", "system:nodes", "system:masters"},
			"users":  []string{"system:admin", "system:serviceaccount:openshift-infra:build-controller"},
		}),
		object("security.openshift.io/v1", "SecurityContextConstraints", "", "restricted-v2", map[string]any{
			"allowHostDirVolumePlugin": false, "allowHostIPC": false, "allowHostNetwork": false, "allowHostPID": false,
			"allowHostPorts": false, "allowPrivilegeEscalation": false, "allowPrivilegedContainer": false,
			"allowedCapabilities": []string{"NET_BIND_SERVICE"}, "requiredDropCapabilities": []string{"ALL"},
			"fsGroup": map[string]any{"type": "MustRunAs"}, "runAsUser": map[string]any{"type": "MustRunAsRange"},
			"seLinuxContext": map[string]any{"type": "MustRunAs"}, "supplementalGroups": map[string]any{"type": "RunAsAny"},
			"seccompProfiles": []string{"runtime/default"}, "readOnlyRootFilesystem": false,
			"volumes": []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"},
			"groups":  []string{}, "users": []string{},
		}),
	}
}

// openshiftDriverToolkit is the Driver Toolkit image stream: one tag per RHCOS version in the
// release. The GPU operator matches its tags against the nodes' OSTREE_VERSION label
// (controllers/clusterinfo getOpenshiftDTKImages).
func openshiftDriverToolkit(rel openshiftRelease) unstructured.Unstructured {
	dtkImage := "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + hexToken("dtk/"+rel.os.ostreeVersion, 64)
	dtkTag := func(name string) map[string]any {
		return map[string]any{
			"name":            name,
			"from":            map[string]any{"kind": "DockerImage", "name": dtkImage},
			"importPolicy":    map[string]any{"importMode": "Legacy"},
			"referencePolicy": map[string]any{"type": "Source"},
		}
	}
	return object("image.openshift.io/v1", "ImageStream", "openshift", "driver-toolkit", map[string]any{
		"spec": map[string]any{"lookupPolicy": map[string]any{"local": false}, "tags": []any{dtkTag(rel.os.ostreeVersion), dtkTag("latest")}},
	})
}

// openshiftCatalogs are OLM's default catalogs and the global OperatorGroup.
func openshiftCatalogs(rel openshiftRelease) []unstructured.Unstructured {
	var objs []unstructured.Unstructured
	for _, c := range []struct{ name, display, index string }{
		{"certified-operators", "Certified Operators", "certified-operator-index"},
		{"redhat-operators", "Red Hat Operators", "redhat-operator-index"},
	} {
		objs = append(objs, object("operators.coreos.com/v1alpha1", "CatalogSource", "openshift-marketplace", c.name, map[string]any{
			"spec": map[string]any{
				"displayName":    c.display,
				"publisher":      "Red Hat",
				"sourceType":     "grpc",
				"image":          fmt.Sprintf("registry.redhat.io/redhat/%s:v4.%d", c.index, rel.minor),
				"priority":       -100,
				"updateStrategy": map[string]any{"registryPoll": map[string]any{"interval": "10m"}},
			},
			"status": map[string]any{"connectionState": map[string]any{"lastObservedState": "READY", "address": c.name + ".openshift-marketplace.svc:50051"}},
		}))
	}
	objs = append(objs, object("operators.coreos.com/v1", "OperatorGroup", "openshift-operators", "global-operators", map[string]any{"spec": map[string]any{}}))
	return objs
}

// gpuOperatorPackage is the PackageManifest of NVIDIA's certified GPU operator. Channels and CSV facts
// from NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst and NVIDIA/gpu-operator
// bundle/manifests/gpu-operator-certified.clusterserviceversion.yaml@v26.7.0 (bundle channels stable and v26.7, default v26.7;
// olm.skipRange; the alm-example ClusterPolicy gpu-cluster-policy with use_ocp_driver_toolkit, dcgm,
// nodeStatusExporter and cdi enabled) and NVIDIA/gpu-operator api/nvidia/v1/clusterpolicy_types.go@v26.7.0 (ClusterPolicy's
// required blocks) and https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-driver-configuration.html
// (NVIDIADriver's fields).
//
// The default channel is the one whose head is defaultRelease ("v26.3.3" → v26.3; "" → gpuctl's
// default release), so a sandbox can stand for a catalog of another day.
func gpuOperatorPackage(defaultRelease string) unstructured.Unstructured {
	return packageManifest("gpu-operator-certified", "certified-operators", "Certified Operators", "NVIDIA Corporation", releaseChannel(defaultRelease), []any{
		gpuOperatorChannel("stable", "26.7.0", "26.3.3", "26.3.2", "26.3.1", "26.3.0", "25.10.1", "25.10.0"),
		gpuOperatorChannel("v26.7", "26.7.0"),
		gpuOperatorChannel("v26.3", "26.3.3", "26.3.2", "26.3.1", "26.3.0"),
		gpuOperatorChannel("v25.10", "25.10.1", "25.10.0"),
	})
}

// gpuOperatorClusterPolicy is the ClusterPolicy alm-example of a release's CSV.
func gpuOperatorClusterPolicy(version string) map[string]any {
	operator := map[string]any{"use_ocp_driver_toolkit": true, "initContainer": map[string]any{}}
	if version < "26" {
		// ClusterPolicy CRDs before 26.x require operator.defaultRuntime (NVIDIA/gpu-operator#2163).
		operator["defaultRuntime"] = "crio"
	}
	return map[string]any{
		"apiVersion": "nvidia.com/v1",
		"kind":       "ClusterPolicy",
		"metadata":   map[string]any{"name": "gpu-cluster-policy"},
		"spec": map[string]any{
			"operator": operator,
			"daemonsets": map[string]any{
				"updateStrategy": "RollingUpdate",
				"rollingUpdate":  map[string]any{"maxUnavailable": "1"},
				"tolerations":    []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}},
			},
			"driver": map[string]any{
				"enabled":            true,
				"useNvidiaDriverCRD": false,
				"kernelModuleType":   "auto",
				"repoConfig":         map[string]any{"configMapName": ""},
				"certConfig":         map[string]any{"name": ""},
				// A bundle's alm-examples always fit its own CRDs: the OLM stand-in installs each
				// release's bundle CRDs, and TestOpenShiftCatalogExamplesFitEachReleasesCRDs holds
				// these examples against them (upgradePolicy.podDeletion, as the CRDs of v25.10.1 to
				// v26.7.0 call it, not gpuPodDeletion; the upgrade controller refuses an empty one).
				"licensingConfig":    map[string]any{"nlsEnabled": true},
				"virtualTopology":    map[string]any{"config": ""},
				"kernelModuleConfig": map[string]any{"name": ""},
				"upgradePolicy": map[string]any{
					"autoUpgrade": true, "maxParallelUpgrades": 1, "maxUnavailable": "25%",
					"drain":             map[string]any{"deleteEmptyDir": false, "enable": false, "force": false, "timeoutSeconds": 300},
					"podDeletion":       map[string]any{"deleteEmptyDir": false, "force": false, "timeoutSeconds": 300},
					"waitForCompletion": map[string]any{"timeoutSeconds": 0},
				},
			},
			"toolkit":             map[string]any{"enabled": true, "installDir": "/usr/local/nvidia"},
			"devicePlugin":        map[string]any{"enabled": true, "config": map[string]any{"name": "", "default": ""}, "mps": map[string]any{"root": "/run/nvidia/mps"}},
			"dcgm":                map[string]any{"enabled": true},
			"dcgmExporter":        map[string]any{"enabled": true, "config": map[string]any{"name": ""}, "serviceMonitor": map[string]any{"enabled": true}},
			"gfd":                 map[string]any{"enabled": true},
			"nodeStatusExporter":  map[string]any{"enabled": true},
			"mig":                 map[string]any{"strategy": "single"},
			"migManager":          map[string]any{"enabled": true},
			"validator":           map[string]any{"plugin": map[string]any{"env": []any{map[string]any{"name": "WITH_WORKLOAD", "value": "false"}}}},
			"sandboxWorkloads":    map[string]any{"enabled": false, "defaultWorkload": "container"},
			"vgpuManager":         map[string]any{"enabled": false},
			"vgpuDeviceManager":   map[string]any{"enabled": true},
			"vfioManager":         map[string]any{"enabled": true},
			"sandboxDevicePlugin": map[string]any{"enabled": true},
			"gds":                 map[string]any{"enabled": false},
			"gdrcopy":             map[string]any{"enabled": false},
			"cdi":                 map[string]any{"enabled": true},
		},
	}
}

// gpuOperatorNVIDIADriver is the NVIDIADriver alm-example every CSV carries.
func gpuOperatorNVIDIADriver() map[string]any {
	return map[string]any{
		"apiVersion": "nvidia.com/v1alpha1",
		"kind":       "NVIDIADriver",
		"metadata":   map[string]any{"name": "gpu-driver"},
		"spec": map[string]any{
			"driverType":       "gpu",
			"image":            "driver",
			"repository":       "nvcr.io/nvidia",
			"version":          "595.91.07",
			"kernelModuleType": "auto",
			"usePrecompiled":   false,
			"nodeSelector":     map[string]any{},
		},
	}
}

// gpuOperatorCSVDesc is the currentCSVDesc of a release's CSV.
func gpuOperatorCSVDesc(version string) map[string]any {
	return map[string]any{
		"displayName": "NVIDIA GPU Operator",
		"version":     version,
		"provider":    map[string]any{"name": "NVIDIA Corporation"},
		"annotations": map[string]any{
			"alm-examples":   jsonString([]any{gpuOperatorClusterPolicy(version), gpuOperatorNVIDIADriver()}),
			"capabilities":   "Deep Insights",
			"categories":     "AI/Machine Learning, OpenShift Optional",
			"containerImage": "nvcr.io/nvidia/gpu-operator@sha256:" + hexToken("gpu-operator/"+version, 64),
			"olm.skipRange":  ">=1.9.0 <" + version,
			"operatorframework.io/suggested-namespace": "nvidia-gpu-operator",
		},
		"installModes": installModes(true, true, false, false),
	}
}

// gpuOperatorChannel is a channel of the package. A channel's head is its first version; entries list
// every bundle in it, newest first.
func gpuOperatorChannel(name string, versions ...string) map[string]any {
	var entries []any
	for _, v := range versions {
		entries = append(entries, map[string]any{"name": "gpu-operator-certified.v" + v, "version": v})
	}
	return map[string]any{
		"name":           name,
		"currentCSV":     "gpu-operator-certified.v" + versions[0],
		"currentCSVDesc": gpuOperatorCSVDesc(versions[0]),
		"entries":        entries,
	}
}

// releaseChannel is the OLM channel of a GPU operator release: "v26.3.3" → "v26.3"; "" is gpuctl's
// default release's.
func releaseChannel(release string) string {
	if release == "" {
		release = bundle.Default().Version
	}
	parts := strings.SplitN(strings.TrimPrefix(release, "v"), ".", 3)
	if len(parts) < 2 {
		return "stable"
	}
	return "v" + parts[0] + "." + parts[1]
}

// nfdPackage is the PackageManifest of Red Hat's Node Feature Discovery Operator, which ships with
// each OpenShift minor (CSV nfd.4.<minor>.0-<build date>) in the redhat-operators catalog.
func nfdPackage(rel openshiftRelease) unstructured.Unstructured {
	nfdInstance := map[string]any{
		"apiVersion": "nfd.openshift.io/v1",
		"kind":       "NodeFeatureDiscovery",
		"metadata":   map[string]any{"name": "nfd-instance", "namespace": "openshift-nfd"},
		"spec": map[string]any{
			"operand": map[string]any{
				"image":       fmt.Sprintf("registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:v4.%d", rel.minor),
				"servicePort": 12000,
			},
		},
	}
	csvVersion := fmt.Sprintf("4.%d.0-202601051012", rel.minor)
	csvName := "nfd." + csvVersion
	return packageManifest("nfd", "redhat-operators", "Red Hat Operators", "Red Hat", "stable", []any{map[string]any{
		"name":       "stable",
		"currentCSV": csvName,
		"entries":    []any{map[string]any{"name": csvName, "version": csvVersion}},
		"currentCSVDesc": map[string]any{
			"displayName": "Node Feature Discovery Operator",
			"version":     csvVersion,
			"provider":    map[string]any{"name": "Red Hat"},
			"annotations": map[string]any{
				"alm-examples": jsonString([]any{nfdInstance}),
				"operatorframework.io/suggested-namespace": "openshift-nfd",
			},
			"installModes": installModes(true, true, false, false),
		},
	}})
}

// installModes is a CSV's install modes.
func installModes(ownNamespace, singleNamespace, multiNamespace, allNamespaces bool) []any {
	return []any{
		map[string]any{"type": "OwnNamespace", "supported": ownNamespace},
		map[string]any{"type": "SingleNamespace", "supported": singleNamespace},
		map[string]any{"type": "MultiNamespace", "supported": multiNamespace},
		map[string]any{"type": "AllNamespaces", "supported": allNamespaces},
	}
}

// packageManifest is a PackageManifest in openshift-marketplace, as OLM's package server lists them.
func packageManifest(name, catalog, catalogDisplay, provider, defaultChannel string, channels []any) unstructured.Unstructured {
	u := object("packages.operators.coreos.com/v1", "PackageManifest", "openshift-marketplace", name, map[string]any{
		"spec": map[string]any{},
		"status": map[string]any{
			"packageName":              name,
			"catalogSource":            catalog,
			"catalogSourceDisplayName": catalogDisplay,
			"catalogSourceNamespace":   "openshift-marketplace",
			"catalogSourcePublisher":   "Red Hat",
			"provider":                 map[string]any{"name": provider},
			"defaultChannel":           defaultChannel,
			"channels":                 channels,
		},
	})
	// The package server also labels by provider ("NVIDIA Corporation"), which is no valid label value
	// for an object the API server stores, so the stand-in leaves it out.
	u.SetLabels(map[string]string{
		"catalog":                         catalog,
		"catalog-namespace":               "openshift-marketplace",
		"operatorframework.io/arch.amd64": "supported",
		"operatorframework.io/os.linux":   "supported",
	})
	return u
}
