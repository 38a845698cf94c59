package preflight

import (
	"testing"
	"time"

	"github.com/gpuctl/gpuctl/internal/detect"
)

func ourOperatorRelease() *detect.HelmRelease {
	return &detect.HelmRelease{Name: "gpu-operator", Namespace: "gpu-operator", Status: "deployed", ChartVersion: "26.7.0", Gpuctl: true}
}

// nvidiasOwnRelease is NVIDIA's chart installed with Helm as NVIDIA's guide has it (helm install
// gpu-operator nvidia/gpu-operator -n gpu-operator): gpuctl's release name, without gpuctl's label.
func nvidiasOwnRelease() *detect.HelmRelease {
	return &detect.HelmRelease{Name: "gpu-operator", Namespace: "gpu-operator", Status: "deployed", Chart: "gpu-operator", ChartVersion: "v26.7.0"}
}

func TestExistingOperator(t *testing.T) {
	tests := []struct {
		name     string
		existing detect.OperatorInstall
		status   Status
		msg      string
		hint     string
	}{
		{"none passes", detect.OperatorInstall{}, StatusPass, "none", ""},
		{"gpuctl's own release passes: it is upgraded", detect.OperatorInstall{Present: true, Helm: ourOperatorRelease()}, StatusPass, "gpuctl's own", ""},
		{"a release of gpuctl's name that gpuctl did not write fails, naming --adopt",
			detect.OperatorInstall{Present: true, Helm: nvidiasOwnRelease()},
			StatusFail, "Helm release gpu-operator/gpu-operator (deployed, chart v26.7.0) without gpuctl's release label gpuctl.io/managed", "gpuctl install --adopt"},
		{"another Helm release fails with the helm uninstall command",
			detect.OperatorInstall{Present: true, Helm: &detect.HelmRelease{Name: "nv", Namespace: "nvidia", Status: "deployed"}},
			StatusFail, "Helm release nvidia/nv", "helm uninstall nv -n nvidia"},
		{"the same release name in another namespace suggests -n",
			detect.OperatorInstall{Present: true, Helm: &detect.HelmRelease{Name: "gpu-operator", Namespace: "nvidia"}},
			StatusFail, "Helm release nvidia/gpu-operator", "gpuctl install -n nvidia --adopt"},
		{"an OLM install fails and points at OLM",
			detect.OperatorInstall{Present: true, OLM: &detect.Subscription{Namespace: "nvidia-gpu-operator", Name: "gpu-operator-certified", Package: "gpu-operator-certified"}},
			StatusFail, "OLM subscription", "managed by OLM"},
		{"a bare Deployment fails",
			detect.OperatorInstall{Present: true, Deployment: &detect.Component{Kind: "Deployment", Namespace: "kube-system", Name: "gpu-operator"}},
			StatusFail, "Deployment kube-system/gpu-operator", "uninstall it first"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv()
			env.Detection.Existing.GPUOperator = tc.existing
			expect(t, run(t, "existing-operator", env), tc.status, tc.msg, tc.hint)
		})
	}
}

func TestExistingClusterPolicy(t *testing.T) {
	old, young := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ours := detect.OperatorInstall{Present: true, Helm: ourOperatorRelease()}
	foreign := detect.OperatorInstall{Present: true, Helm: &detect.HelmRelease{Name: "nv", Namespace: "nvidia"}}
	tests := []struct {
		name     string
		operator detect.OperatorInstall
		policies []detect.ClusterPolicy
		status   Status
		msg      string
		hint     string
	}{
		{"none passes", detect.OperatorInstall{}, nil, StatusPass, "none", ""},
		{"gpuctl's own passes", ours, []detect.ClusterPolicy{{Name: "cluster-policy", Created: old, State: "ready"}}, StatusPass, "cluster-policy (ready)", ""},
		{"one without an operator fails: Helm will not take it over", detect.OperatorInstall{}, []detect.ClusterPolicy{{Name: "cluster-policy", Created: old}},
			StatusFail, "without a GPU operator", "kubectl delete clusterpolicy cluster-policy"},
		{"another operator's fails", foreign, []detect.ClusterPolicy{{Name: "cluster-policy", Created: old}}, StatusFail, "belongs to the GPU operator", "existing-operator"},
		{"an older foreign one next to ours fails: the operator honours the oldest", ours,
			[]detect.ClusterPolicy{{Name: "legacy", Created: old}, {Name: "cluster-policy", Created: young}}, StatusFail, "ClusterPolicy legacy is older", "kubectl delete clusterpolicy legacy"},
		{"a younger extra one next to ours warns", ours,
			[]detect.ClusterPolicy{{Name: "cluster-policy", Created: old}, {Name: "extra", Created: young}}, StatusWarn, "extra exists", "kubectl delete clusterpolicy extra"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv()
			e := &env.Detection.Existing
			e.GPUOperator, e.ClusterPolicies = tc.operator, tc.policies
			if len(tc.policies) > 0 {
				e.ActiveClusterPolicy = tc.policies[0].Name
			}
			expect(t, run(t, "existing-clusterpolicy", env), tc.status, tc.msg, tc.hint)
		})
	}
}

func TestExistingNFD(t *testing.T) {
	tests := []struct {
		name   string
		nfd    detect.NFDInstall
		status Status
		msg    string
	}{
		{"none passes: gpuctl installs it", detect.NFDInstall{}, StatusPass, "gpuctl installs NFD"},
		{"labels of an earlier NFD are mentioned", detect.NFDInstall{LabelledNodes: 3}, StatusPass, "3 nodes carry labels"},
		{"gpuctl's own release passes", detect.NFDInstall{Present: true, Namespaces: []string{"gpu-operator"},
			Helm: &detect.HelmRelease{Name: "node-feature-discovery", Namespace: "gpu-operator", Status: "deployed", Gpuctl: true}}, StatusPass, "gpuctl's own"},
		{"a release of gpuctl's NFD name that gpuctl did not write is someone else's: used, not upgraded", detect.NFDInstall{Present: true, Namespaces: []string{"gpu-operator"},
			Helm: &detect.HelmRelease{Name: "node-feature-discovery", Namespace: "gpu-operator", Status: "deployed"}}, StatusWarn, "gpuctl uses it"},
		{"someone else's NFD warns: it will be used", detect.NFDInstall{Present: true, Namespaces: []string{"nfd"},
			Helm: &detect.HelmRelease{Name: "nfd", Namespace: "nfd"}}, StatusWarn, "gpuctl uses it"},
		{"NFD from OLM warns", detect.NFDInstall{Present: true, OLM: &detect.Subscription{Namespace: "openshift-nfd", Name: "nfd"}}, StatusWarn, "OLM subscription openshift-nfd/nfd"},
		{"two NFDs warn", detect.NFDInstall{Present: true, Namespaces: []string{"a", "b"}}, StatusWarn, "more than one namespace (a, b)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv()
			env.Detection.Existing.NFD = tc.nfd
			expect(t, run(t, "existing-nfd", env), tc.status, tc.msg, "")
		})
	}
}

func TestDevicePlugin(t *testing.T) {
	plugin := func(provider, managedBy string, desired int32, nodes ...string) detect.DevicePlugin {
		return detect.DevicePlugin{Provider: provider, Nodes: nodes,
			Component: detect.Component{Kind: "DaemonSet", Namespace: "kube-system", Name: "nvidia-gpu-device-plugin", Desired: desired, ManagedBy: managedBy}}
	}
	tests := []struct {
		name    string
		plugins []detect.DevicePlugin
		status  Status
		msg     string
		hint    string
	}{
		{"none passes", nil, StatusPass, "none", ""},
		{"the GPU operator's own is not counted", []detect.DevicePlugin{plugin("gpu-operator", "ClusterPolicy/cluster-policy", 1, "gpu-1")}, StatusPass, "none", ""},
		{"GKE's on GPU nodes fails with the node pool remedy", []detect.DevicePlugin{plugin("gke", "GKE", 1, "gpu-1")},
			StatusFail, "runs on 1 GPU node (GKE)", "--node-labels=gke-no-default-nvidia-gpu-device-plugin=true"},
		{"GKE's with no node to run on passes", []detect.DevicePlugin{plugin("gke", "GKE", 0)}, StatusPass, "none", ""},
		{"a standalone Helm release fails with helm uninstall", []detect.DevicePlugin{plugin("standalone", "helm release nvdp/nvdp", 1, "gpu-1")},
			StatusFail, "nvidia-gpu-device-plugin", "helm uninstall nvdp -n nvdp"},
		{"a standalone DaemonSet on other nodes still fails", []detect.DevicePlugin{plugin("standalone", "", 2, "cpu-1")},
			StatusFail, "runs on 2 nodes", "kubectl delete daemonset"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv()
			env.Detection.Existing.DevicePlugins = tc.plugins
			expect(t, run(t, "device-plugin", env), tc.status, tc.msg, tc.hint)
		})
	}
}
