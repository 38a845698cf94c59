package flavor

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/nfd"
)

func TestFlavorsCoverTheNineDistributions(t *testing.T) {
	want := []string{"openshift", "gke", "tkgs", "rke2", "k3s", "eks", "aks", "microk8s", "kubeadm"}
	if got := Distros(); !slices.Equal(got, want) {
		t.Errorf("Distros() = %v, want %v", got, want)
	}
	for _, d := range want {
		f, err := For(d)
		if err != nil {
			t.Errorf("FlavorFor(%q): %v", d, err)
			continue
		}
		if f.Name != d || f.Description == "" || f.Nodes == nil || f.CRDs == nil || f.Objects == nil {
			t.Errorf("FlavorFor(%q) is incomplete: %+v", d, f)
		}
	}
}

func TestFlavorForAnUnknownNameListsTheValidOnes(t *testing.T) {
	_, err := For("minikube")
	if err == nil {
		t.Fatal("FlavorFor(minikube) succeeded")
	}
	for _, d := range Distros() {
		if !strings.Contains(err.Error(), d) {
			t.Errorf("error %q does not name %s", err, d)
		}
	}
}

func TestFlavorScenarioDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   Scenario
		want Scenario
	}{
		{
			name: "the zero scenario is kubeadm with two GPU nodes and one CPU node",
			in:   Scenario{},
			want: Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1, GPUsPerNode: 1, KubeletVersion: "v1.37.2"},
		},
		{
			name: "GPU nodes without CPU nodes stay that way",
			in:   Scenario{Distro: "gke", GPUNodes: 3},
			want: Scenario{Distro: "gke", GPUNodes: 3, GPUsPerNode: 1, KubeletVersion: "v1.37.2"},
		},
		{
			name: "CPU nodes without GPU nodes stay that way",
			in:   Scenario{CPUNodes: 2},
			want: Scenario{Distro: "kubeadm", CPUNodes: 2, GPUsPerNode: 1, KubeletVersion: "v1.37.2"},
		},
		{
			name: "explicit values are kept and a version gets its v",
			in:   Scenario{Distro: "OpenShift", GPUNodes: 1, CPUNodes: 4, GPUsPerNode: 8, KubeletVersion: "1.31.6", NFDLabels: true},
			want: Scenario{Distro: "openshift", GPUNodes: 1, CPUNodes: 4, GPUsPerNode: 8, KubeletVersion: "v1.31.6", NFDLabels: true},
		},
		{
			name: "Autopilot implies GKE's device plugin",
			in:   Scenario{Distro: "gke", GKEAutopilot: true},
			want: Scenario{Distro: "gke", GPUNodes: 2, CPUNodes: 1, GPUsPerNode: 1, KubeletVersion: "v1.37.2", GKEAutopilot: true, GKEDevicePlugin: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.Defaults()
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Defaults() = %+v, want %+v", got, tt.want)
			}
			if again := got.Defaults(); !reflect.DeepEqual(again, got) {
				t.Errorf("Defaults is not idempotent: %+v then %+v", got, again)
			}
		})
	}
}

// controlPlanes is how many control-plane nodes each flavour shows.
var controlPlanes = map[string]int{
	"openshift": 1, "gke": 0, "tkgs": 1, "rke2": 1, "k3s": 1, "eks": 0, "aks": 0, "microk8s": 1, "kubeadm": 1,
}

// scenarios are the shapes every flavour is checked with.
func scenarios(distro string) []Scenario {
	out := []Scenario{
		{Distro: distro},
		{Distro: distro, GPUNodes: 3, CPUNodes: 0, GPUsPerNode: 4, NFDLabels: true, PreinstalledDriver: true},
		{Distro: distro, GPUNodes: 1, CPUNodes: 5, GPUsPerNode: 8, KubeletVersion: "v1.33.4"},
		{Distro: distro, GPUNodes: 40, CPUNodes: 40},
	}
	if distro == "gke" {
		out = append(out,
			Scenario{Distro: distro, GKEDevicePlugin: true, NFDLabels: true},
			Scenario{Distro: distro, GKEAutopilot: true, GPUNodes: 2, CPUNodes: 0},
		)
	}
	return out
}

func roleOf(distro string, i int, s Scenario) role {
	s = s.Defaults()
	switch cp := controlPlanes[distro]; {
	case i < cp:
		return controlPlane
	case i < cp+s.GPUNodes:
		return gpuWorker
	default:
		return cpuWorker
	}
}

func TestEveryFlavourMakesTheScenariosNodes(t *testing.T) {
	for _, distro := range Distros() {
		f, _ := For(distro)
		for _, s := range scenarios(distro) {
			t.Run(fmt.Sprintf("%s %+v", distro, s), func(t *testing.T) {
				d := s.Defaults()
				nodes := f.Nodes(s)
				if want := controlPlanes[distro] + d.GPUNodes + d.CPUNodes; len(nodes) != want {
					t.Fatalf("%d nodes, want %d", len(nodes), want)
				}
				if !reflect.DeepEqual(nodes, f.Nodes(s)) {
					t.Error("two calls made different nodes")
				}
				names := map[string]bool{}
				for i, sim := range nodes {
					n := sim.Node
					if names[n.Name] {
						t.Errorf("node name %s is used twice", n.Name)
					}
					names[n.Name] = true
					checkNode(t, d, roleOf(distro, i, s), sim)
				}
			})
		}
	}
}

// checkNode checks what every flavour's nodes must have.
func checkNode(t *testing.T, s Scenario, r role, sim SimNode) {
	t.Helper()
	n, hw := sim.Node, sim.Hardware
	if errs := content.IsDNS1123Subdomain(n.Name); len(errs) > 0 {
		t.Errorf("node name %q: %v", n.Name, errs)
	}
	if n.APIVersion != "v1" || n.Kind != "Node" {
		t.Errorf("%s: TypeMeta %v", n.Name, n.TypeMeta)
	}
	if n.Annotations[kwokNodeAnnotation] != "fake" {
		t.Errorf("%s lacks annotation %s: fake, which kwok needs", n.Name, kwokNodeAnnotation)
	}
	for k, v := range n.Labels {
		if errs := append(content.IsLabelKey(k), content.IsLabelValue(v)...); len(errs) > 0 {
			t.Errorf("%s: label %s=%q: %v", n.Name, k, v, errs)
		}
	}
	for k := range n.Annotations {
		if errs := content.IsLabelKey(k); len(errs) > 0 {
			t.Errorf("%s: annotation key %s: %v", n.Name, k, errs)
		}
	}
	for k, v := range map[string]string{"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"} {
		if n.Labels[k] != v {
			t.Errorf("%s: label %s=%q, want %q", n.Name, k, n.Labels[k], v)
		}
	}

	for _, res := range []corev1.ResourceName{"cpu", "memory", "pods", "ephemeral-storage", "hugepages-1Gi", "hugepages-2Mi"} {
		c, okc := n.Status.Capacity[res]
		a, oka := n.Status.Allocatable[res]
		if !okc || !oka {
			t.Errorf("%s: %s missing from capacity or allocatable", n.Name, res)
			continue
		}
		if a.Cmp(c) > 0 || a.Sign() < 0 {
			t.Errorf("%s: allocatable %s %s is not within capacity %s", n.Name, res, a.String(), c.String())
		}
		if res == "cpu" || res == "memory" || res == "pods" || res == "ephemeral-storage" {
			if c.Sign() <= 0 {
				t.Errorf("%s: capacity %s is %s", n.Name, res, c.String())
			}
		}
	}
	for _, list := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
		if _, has := list["nvidia.com/gpu"]; has {
			t.Errorf("%s advertises nvidia.com/gpu without a device plugin", n.Name)
		}
	}

	info := n.Status.NodeInfo
	if !strings.HasPrefix(info.KubeletVersion, s.KubeletVersion) || info.KubeProxyVersion != info.KubeletVersion {
		t.Errorf("%s: kubelet %q, kube-proxy %q, want %s plus the platform's suffix", n.Name, info.KubeletVersion, info.KubeProxyVersion, s.KubeletVersion)
	}
	if _, err := version.ParseSemantic(info.KubeletVersion); err != nil {
		t.Errorf("%s: kubelet version %q is not semver: %v", n.Name, info.KubeletVersion, err)
	}
	if info.OperatingSystem != "linux" || info.Architecture != "amd64" || info.OSImage == "" || info.KernelVersion == "" ||
		info.MachineID == "" || info.SystemUUID == "" || info.BootID == "" {
		t.Errorf("%s: incomplete nodeInfo %+v", n.Name, info)
	}
	if !strings.HasPrefix(info.ContainerRuntimeVersion, "containerd://") && !strings.HasPrefix(info.ContainerRuntimeVersion, "cri-o://") {
		t.Errorf("%s: runtime %q", n.Name, info.ContainerRuntimeVersion)
	}

	// The hardware agrees with the node: os-release with osImage, GPUs with the role.
	if hw.OSReleaseID == "" || hw.OSVersionID == "" {
		t.Errorf("%s: hardware without os-release: %+v", n.Name, hw)
	}
	switch hw.OSReleaseID {
	case "ubuntu":
		if !strings.HasPrefix(info.OSImage, "Ubuntu "+hw.OSVersionID) {
			t.Errorf("%s: osImage %q is not Ubuntu %s", n.Name, info.OSImage, hw.OSVersionID)
		}
	case "cos":
		if info.OSImage != "Container-Optimized OS from Google" {
			t.Errorf("%s: osImage %q on COS", n.Name, info.OSImage)
		}
	case "amzn":
		if !strings.HasPrefix(info.OSImage, "Amazon Linux "+hw.OSVersionID) {
			t.Errorf("%s: osImage %q is not Amazon Linux %s", n.Name, info.OSImage, hw.OSVersionID)
		}
	case "rhcos", "rhel":
		if hw.OSTreeVersion == "" || !strings.Contains(info.OSImage, "CoreOS "+hw.OSTreeVersion) {
			t.Errorf("%s: osImage %q does not carry OSTREE_VERSION %q", n.Name, info.OSImage, hw.OSTreeVersion)
		}
	default:
		t.Errorf("%s: unexpected os-release ID %q", n.Name, hw.OSReleaseID)
	}
	if hw.OSTreeVersion != "" && !strings.HasPrefix(info.ContainerRuntimeVersion, "cri-o://") {
		t.Errorf("%s: an OSTree node that does not run CRI-O", n.Name)
	}

	if r == gpuWorker {
		known := standin.GPUModelFor(hw.GPUProduct).Device != "" && standin.GPUModelFor(hw.GPUProduct).Class == hw.GPUPCIClass
		if hw.GPUs != s.GPUsPerNode || !known {
			t.Errorf("%s: GPU hardware %+v, want %d of a known model", n.Name, hw, s.GPUsPerNode)
		}
	} else if hw.GPUs != 0 || hw.GPUProduct != "" {
		t.Errorf("%s: a node without GPUs has GPU hardware %+v", n.Name, hw)
	}

	if r == controlPlane && len(n.Spec.Taints) == 0 && s.Distro != "rke2" && s.Distro != "k3s" && s.Distro != "microk8s" {
		t.Errorf("%s: control-plane node is not tainted", n.Name)
	}
	if r != controlPlane {
		for _, taint := range n.Spec.Taints {
			if taint.Key != taintGPU || s.Distro != "gke" || r != gpuWorker {
				t.Errorf("%s: worker tainted %v", n.Name, taint)
			}
		}
	}

	// Scenario knobs.
	_, hasPCI := n.Labels[nfd.LabelPrefix+"pci-10de.present"]
	hasNFD := n.Labels[nfd.LabelPrefix+"system-os_release.ID"] != ""
	wantNFD := s.NFDLabels && r != controlPlane
	if hasNFD != wantNFD || hasPCI != (wantNFD && r == gpuWorker) {
		t.Errorf("%s: NFD labels %v, PCI label %v; NFDLabels=%v", n.Name, hasNFD, hasPCI, s.NFDLabels)
	}
	if wantNFD {
		for k, v := range nfd.Labels(hw, info, []string{"vendor"}) {
			if n.Labels[k] != v {
				t.Errorf("%s: %s=%q, want %q", n.Name, k, n.Labels[k], v)
			}
		}
	}
	if got, want := n.Labels[labelGPUDeployDriver] == "pre-installed", s.PreinstalledDriver && r == gpuWorker; got != want {
		t.Errorf("%s: %s=pre-installed is %v, want %v", n.Name, labelGPUDeployDriver, got, want)
	}
}

func TestEachFlavoursNodesCarryItsSignals(t *testing.T) {
	re := regexp.MustCompile
	hasLabel := func(n corev1.Node, k, v string) bool { got, ok := n.Labels[k]; return ok && got == v }
	tainted := func(n corev1.Node, key string) bool {
		return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key && t.Effect == corev1.TaintEffectNoSchedule })
	}
	type check func(n corev1.Node, r role) error
	expect := func(ok bool, format string, args ...any) error {
		if ok {
			return nil
		}
		return fmt.Errorf(format, args...)
	}
	tests := []struct {
		distro string
		checks []check
	}{
		{"openshift", []check{
			func(n corev1.Node, r role) error {
				return expect(hasLabel(n, "node.openshift.io/os_id", "rhel") && strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "cri-o://1.37.2-"),
					"os_id %q, runtime %q", n.Labels["node.openshift.io/os_id"], n.Status.NodeInfo.ContainerRuntimeVersion)
			},
			func(n corev1.Node, r role) error {
				return expect(strings.HasPrefix(n.Status.NodeInfo.OSImage, "Red Hat Enterprise Linux CoreOS 9.6.") && strings.HasPrefix(n.Spec.ProviderID, "aws:///us-east-2"),
					"osImage %q providerID %q", n.Status.NodeInfo.OSImage, n.Spec.ProviderID)
			},
			func(n corev1.Node, r role) error {
				if r == controlPlane {
					return expect(tainted(n, "node-role.kubernetes.io/master") && hasLabel(n, "node-role.kubernetes.io/master", ""), "master not labelled and tainted")
				}
				return expect(hasLabel(n, "node-role.kubernetes.io/worker", ""), "worker role label missing")
			},
			func(n corev1.Node, r role) error {
				return expect(strings.HasPrefix(n.Annotations["machineconfiguration.openshift.io/currentConfig"], "rendered-"), "no MCO annotations")
			},
		}},
		{"gke", []check{
			func(n corev1.Node, r role) error {
				return expect(strings.HasPrefix(n.Spec.ProviderID, "gce://gpuctl-sandbox/us-central1-a/"+n.Name) &&
					strings.HasSuffix(n.Status.NodeInfo.KubeletVersion, "-gke.1172000") &&
					re(`^gke-sandbox-(gpu|default)-pool-[0-9a-f]{8}-[0-9a-z]{4}$`).MatchString(n.Name),
					"providerID %q kubelet %q name %q", n.Spec.ProviderID, n.Status.NodeInfo.KubeletVersion, n.Name)
			},
			func(n corev1.Node, r role) error {
				return expect(n.Status.NodeInfo.OSImage == "Container-Optimized OS from Google" && hasLabel(n, "cloud.google.com/gke-os-distribution", "cos"), "not COS")
			},
			func(n corev1.Node, r role) error {
				if r == gpuWorker {
					return expect(hasLabel(n, "cloud.google.com/gke-accelerator", "nvidia-tesla-a100") && hasLabel(n, "node.kubernetes.io/instance-type", "a2-highgpu-1g") &&
						hasLabel(n, gkeNoDevicePluginLabel, "true") && tainted(n, taintGPU) && n.Spec.Taints[0].Value == "present",
						"GPU node labels %v taints %v", n.Labels, n.Spec.Taints)
				}
				_, acc := n.Labels["cloud.google.com/gke-accelerator"]
				return expect(!acc && hasLabel(n, "cloud.google.com/gke-nodepool", "default-pool"), "CPU node labels %v", n.Labels)
			},
		}},
		{"tkgs", []check{
			func(n corev1.Node, r role) error {
				return expect(strings.HasSuffix(n.Status.NodeInfo.KubeletVersion, "+vmware.1") &&
					hasLabel(n, "run.tanzu.vmware.com/kubernetesDistributionVersion", "v1.37.2_vmware.1-tkg.1") &&
					re(`^vsphere://42[0-9a-f]{6}-`).MatchString(n.Spec.ProviderID) &&
					n.Annotations["cluster.x-k8s.io/cluster-name"] == "tkgs-gpu",
					"kubelet %q labels %v providerID %q", n.Status.NodeInfo.KubeletVersion, n.Labels, n.Spec.ProviderID)
			},
			func(n corev1.Node, r role) error {
				if r == controlPlane {
					return expect(tainted(n, "node-role.kubernetes.io/control-plane") && re(`^tkgs-gpu-control-plane-[a-z0-9]{5}$`).MatchString(n.Name), "control plane %s %v", n.Name, n.Spec.Taints)
				}
				_, it := n.Labels["node.kubernetes.io/instance-type"]
				return expect(!it && re(`^tkgs-gpu-(gpu|cpu)-pool-[a-z0-9]{5}-[a-z0-9]{9}$`).MatchString(n.Name), "worker %s labels %v", n.Name, n.Labels)
			},
		}},
		{"rke2", []check{
			func(n corev1.Node, r role) error {
				return expect(strings.HasSuffix(n.Status.NodeInfo.KubeletVersion, "+rke2r1") && n.Spec.ProviderID == "rke2://"+n.Name &&
					hasLabel(n, "node.kubernetes.io/instance-type", "rke2") && strings.HasSuffix(n.Status.NodeInfo.ContainerRuntimeVersion, "-k3s1") &&
					n.Annotations["rke2.io/hostname"] == n.Name,
					"kubelet %q providerID %q labels %v", n.Status.NodeInfo.KubeletVersion, n.Spec.ProviderID, n.Labels)
			},
			func(n corev1.Node, r role) error {
				var args []string
				if err := json.Unmarshal([]byte(n.Annotations["rke2.io/node-args"]), &args); err != nil || len(args) == 0 {
					return fmt.Errorf("rke2.io/node-args %q: %v", n.Annotations["rke2.io/node-args"], err)
				}
				if r == controlPlane {
					return expect(args[0] == "server" && len(n.Spec.Taints) == 0 && hasLabel(n, "node-role.kubernetes.io/etcd", "true") &&
						hasLabel(n, "node-role.kubernetes.io/control-plane", "true") && n.Annotations["etcd.rke2.cattle.io/node-address"] != "",
						"server args %v taints %v labels %v", args, n.Spec.Taints, n.Labels)
				}
				return expect(args[0] == "agent", "agent args %v", args)
			},
		}},
		{"k3s", []check{
			func(n corev1.Node, r role) error {
				return expect(strings.HasSuffix(n.Status.NodeInfo.KubeletVersion, "+k3s1") && n.Spec.ProviderID == "k3s://"+n.Name &&
					hasLabel(n, "node.kubernetes.io/instance-type", "k3s") && n.Annotations["k3s.io/node-args"] != "" &&
					n.Annotations["flannel.alpha.coreos.com/backend-type"] == "vxlan",
					"kubelet %q providerID %q labels %v", n.Status.NodeInfo.KubeletVersion, n.Spec.ProviderID, n.Labels)
			},
			func(n corev1.Node, r role) error {
				if r == controlPlane {
					_, etcd := n.Labels["node-role.kubernetes.io/etcd"]
					return expect(len(n.Spec.Taints) == 0 && hasLabel(n, "node-role.kubernetes.io/master", "true") && !etcd, "server %v %v", n.Labels, n.Spec.Taints)
				}
				return nil
			},
		}},
		{"eks", []check{
			func(n corev1.Node, r role) error {
				return expect(re(`^v1\.37\.2-eks-[0-9a-f]{7}$`).MatchString(n.Status.NodeInfo.KubeletVersion) &&
					re(`^aws:///us-east-1[ab]/i-0[0-9a-f]{16}$`).MatchString(n.Spec.ProviderID) &&
					re(`^ip-10-0-\d+-\d+\.ec2\.internal$`).MatchString(n.Name) &&
					strings.HasPrefix(n.Status.NodeInfo.OSImage, "Amazon Linux 2023"),
					"kubelet %q providerID %q name %q", n.Status.NodeInfo.KubeletVersion, n.Spec.ProviderID, n.Name)
			},
			func(n corev1.Node, r role) error {
				group := map[role]string{gpuWorker: "gpu-nodes", cpuWorker: "cpu-nodes"}[r]
				return expect(hasLabel(n, "eks.amazonaws.com/nodegroup", group) && hasLabel(n, "eks.amazonaws.com/capacityType", "ON_DEMAND") &&
					strings.HasPrefix(n.Labels["eks.amazonaws.com/nodegroup-image"], "ami-") && hasLabel(n, "topology.kubernetes.io/region", "us-east-1"),
					"labels %v", n.Labels)
			},
			func(n corev1.Node, r role) error {
				if r == gpuWorker {
					return expect(hasLabel(n, "node.kubernetes.io/instance-type", "g5.xlarge"), "GPU instance %q", n.Labels["node.kubernetes.io/instance-type"])
				}
				return nil
			},
		}},
		{"aks", []check{
			func(n corev1.Node, r role) error {
				return expect(re(`^aks-(gpupool|nodepool1)-\d{8}-vmss[0-9a-z]{6}$`).MatchString(n.Name) &&
					n.Status.NodeInfo.KubeletVersion == "v1.37.2" &&
					strings.HasPrefix(n.Spec.ProviderID, "azure:///subscriptions/") &&
					hasLabel(n, "kubernetes.azure.com/cluster", "MC_rg-gpuctl_gpuctl-sandbox_eastus") &&
					n.Labels["kubernetes.azure.com/agentpool"] == n.Labels["agentpool"],
					"name %q kubelet %q providerID %q", n.Name, n.Status.NodeInfo.KubeletVersion, n.Spec.ProviderID)
			},
			func(n corev1.Node, r role) error {
				_, acc := n.Labels["kubernetes.azure.com/accelerator"]
				if r == gpuWorker {
					return expect(acc && hasLabel(n, "node.kubernetes.io/instance-type", "Standard_NC24ads_A100_v4") && hasLabel(n, "kubernetes.azure.com/mode", "user"), "GPU labels %v", n.Labels)
				}
				return expect(!acc && hasLabel(n, "kubernetes.azure.com/mode", "system"), "CPU labels %v", n.Labels)
			},
		}},
		{"microk8s", []check{
			func(n corev1.Node, r role) error {
				_, cp := n.Labels["node.kubernetes.io/microk8s-controlplane"]
				_, w := n.Labels["node.kubernetes.io/microk8s-worker"]
				return expect(hasLabel(n, "microk8s.io/cluster", "true") && cp == (r == controlPlane) && w == (r != controlPlane) &&
					n.Spec.ProviderID == "" && len(n.Spec.Taints) == 0 && n.Status.NodeInfo.KubeletVersion == "v1.37.2",
					"labels %v providerID %q taints %v", n.Labels, n.Spec.ProviderID, n.Spec.Taints)
			},
		}},
		{"kubeadm", []check{
			func(n corev1.Node, r role) error {
				_, cpLabel := n.Labels["node-role.kubernetes.io/control-plane"]
				return expect(n.Spec.ProviderID == "" && n.Status.NodeInfo.KubeletVersion == "v1.37.2" &&
					cpLabel == (r == controlPlane) && tainted(n, "node-role.kubernetes.io/control-plane") == (r == controlPlane) &&
					n.Annotations["kubeadm.alpha.kubernetes.io/cri-socket"] != "",
					"labels %v taints %v", n.Labels, n.Spec.Taints)
			},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.distro, func(t *testing.T) {
			f, _ := For(tt.distro)
			s := Scenario{Distro: tt.distro}
			for i, sim := range f.Nodes(s) {
				for _, c := range tt.checks {
					if err := c(sim.Node, roleOf(tt.distro, i, s)); err != nil {
						t.Errorf("%s: %v", sim.Node.Name, err)
					}
				}
			}
		})
	}
}

func TestFlavorGKEVariants(t *testing.T) {
	f, _ := For("gke")
	gpuNodes := func(s Scenario) []corev1.Node {
		var out []corev1.Node
		for _, sim := range f.Nodes(s) {
			if sim.Hardware.GPUs > 0 {
				out = append(out, sim.Node)
			}
		}
		return out
	}
	t.Run("a GPU-only Standard cluster's GPU nodes are not tainted", func(t *testing.T) {
		for _, n := range gpuNodes(Scenario{Distro: "gke", GPUNodes: 2}) {
			if len(n.Spec.Taints) != 0 {
				t.Errorf("%s tainted %v", n.Name, n.Spec.Taints)
			}
		}
	})
	t.Run("GPU counts pick the matching A2 machine type", func(t *testing.T) {
		for gpus, want := range map[int]string{1: "a2-highgpu-1g", 2: "a2-highgpu-2g", 3: "a2-highgpu-4g", 8: "a2-highgpu-8g", 16: "a2-megagpu-16g"} {
			n := gpuNodes(Scenario{Distro: "gke", GPUsPerNode: gpus})[0]
			if got := n.Labels["node.kubernetes.io/instance-type"]; got != want {
				t.Errorf("%d GPUs: %s, want %s", gpus, got, want)
			}
		}
	})
	t.Run("Autopilot nodes are gk3 nodes with L4s, always tainted, and Autopilot serves auto.gke.io", func(t *testing.T) {
		s := Scenario{Distro: "gke", GKEAutopilot: true, GPUNodes: 1, CPUNodes: 0}
		for _, sim := range f.Nodes(s) {
			n := sim.Node
			if !strings.HasPrefix(n.Name, "gk3-sandbox-") || n.Labels["cloud.google.com/gke-max-pods-per-node"] != "32" {
				t.Errorf("%s: not an Autopilot node: %v", n.Name, n.Labels)
			}
			if sim.Hardware.GPUs > 0 && (n.Labels["cloud.google.com/gke-accelerator"] != "nvidia-l4" || len(n.Spec.Taints) != 1 ||
				n.Labels["cloud.google.com/gke-gpu-driver-version"] != "default") {
				t.Errorf("%s: Autopilot GPU node %v %v", n.Name, n.Labels, n.Spec.Taints)
			}
		}
		groups := map[string]bool{}
		for _, o := range f.Objects(s) {
			if o.GetKind() == "CustomResourceDefinition" {
				crd := fromUnstructured[apiextensionsv1.CustomResourceDefinition](t, o)
				checkCRD(t, crd)
				groups[crd.Spec.Group] = true
			}
		}
		if !groups["auto.gke.io"] {
			t.Error("no auto.gke.io CRDs")
		}
		for _, o := range f.Objects(Scenario{Distro: "gke"}) {
			if o.GetKind() == "CustomResourceDefinition" {
				t.Errorf("a Standard cluster has Autopilot's CRD %s", o.GetName())
			}
		}
	})
	t.Run("GKE's device plugin DaemonSets exist only with GKEDevicePlugin and run only on GPU nodes", func(t *testing.T) {
		if ds := daemonSets(t, f.Objects(Scenario{Distro: "gke"})); len(ds) != 0 {
			t.Errorf("device plugin DaemonSets without GKEDevicePlugin: %d", len(ds))
		}
		for _, s := range []Scenario{
			{Distro: "gke", GKEDevicePlugin: true, GPUsPerNode: 1},
			{Distro: "gke", GKEDevicePlugin: true, GPUsPerNode: 4},
			{Distro: "gke", GKEDevicePlugin: true, GPUsPerNode: 8},
			{Distro: "gke", GKEAutopilot: true, GPUsPerNode: 2},
		} {
			ds := daemonSets(t, f.Objects(s))
			if len(ds) != 6 || ds[0].Name != "nvidia-gpu-device-plugin-small-cos" || ds[0].Namespace != "kube-system" ||
				ds[0].Labels["k8s-app"] != "nvidia-gpu-device-plugin" {
				t.Fatalf("%+v: DaemonSets %v", s, ds)
			}
			for _, sim := range f.Nodes(s) {
				var runs []string
				for _, d := range ds {
					if schedulable(sim.Node, d.Spec.Template.Spec) {
						runs = append(runs, d.Name)
					}
				}
				if want := sim.Hardware.GPUs > 0; len(runs) > 1 || (len(runs) == 1) != want {
					t.Errorf("%+v: node %s (GPUs %d) runs %v", s, sim.Node.Name, sim.Hardware.GPUs, runs)
				}
			}
		}
		// Without GKE's plugin the GPU nodes carry the opt-out label, so the DaemonSets would skip them.
		ds := daemonSets(t, f.Objects(Scenario{Distro: "gke", GKEDevicePlugin: true}))
		for _, sim := range f.Nodes(Scenario{Distro: "gke"}) {
			for _, d := range ds {
				if schedulable(sim.Node, d.Spec.Template.Spec) {
					t.Errorf("%s runs %s although it opted out", sim.Node.Name, d.Name)
				}
			}
		}
	})
}

// daemonSets decodes the DaemonSets among objs.
func daemonSets(t *testing.T, objs []unstructured.Unstructured) []appsv1.DaemonSet {
	var out []appsv1.DaemonSet
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" {
			out = append(out, fromUnstructured[appsv1.DaemonSet](t, o))
		}
	}
	return out
}

func fromUnstructured[T any](t *testing.T, u unstructured.Unstructured) T {
	t.Helper()
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// schedulable says whether a pod with this spec fits the node's required node affinity and taints.
func schedulable(n corev1.Node, pod corev1.PodSpec) bool {
	for _, taint := range n.Spec.Taints {
		if !slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
			return (tol.Effect == "" || tol.Effect == taint.Effect) && (tol.Key == "" || tol.Key == taint.Key) &&
				(tol.Operator == corev1.TolerationOpExists || tol.Value == taint.Value)
		}) {
			return false
		}
	}
	if pod.Affinity == nil || pod.Affinity.NodeAffinity == nil || pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if slices.IndexFunc(term.MatchExpressions, func(e corev1.NodeSelectorRequirement) bool {
			v, has := n.Labels[e.Key]
			switch e.Operator {
			case corev1.NodeSelectorOpExists:
				return !has
			case corev1.NodeSelectorOpDoesNotExist:
				return has
			case corev1.NodeSelectorOpIn:
				return !has || !slices.Contains(e.Values, v)
			case corev1.NodeSelectorOpNotIn:
				return has && slices.Contains(e.Values, v)
			}
			return true
		}) < 0 {
			return true
		}
	}
	return false
}

// checkCRD checks that a CRD is one the API server accepts and the sandbox can use.
func checkCRD(t *testing.T, crd apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	s := crd.Spec
	if crd.APIVersion != "apiextensions.k8s.io/v1" || crd.Kind != "CustomResourceDefinition" {
		t.Errorf("%s: TypeMeta %v", crd.Name, crd.TypeMeta)
	}
	if crd.Name != s.Names.Plural+"."+s.Group || !strings.Contains(s.Group, ".") {
		t.Errorf("CRD %s: want name %s.%s with a dotted group", crd.Name, s.Names.Plural, s.Group)
	}
	if errs := content.IsDNS1123Label(s.Names.Plural); len(errs) > 0 || s.Names.Singular != strings.ToLower(s.Names.Kind) ||
		s.Names.ListKind != s.Names.Kind+"List" || s.Names.Kind == "" || s.Names.Kind[0] < 'A' || s.Names.Kind[0] > 'Z' {
		t.Errorf("CRD %s: names %+v", crd.Name, s.Names)
	}
	if protectedGroup(s.Group) && crd.Annotations["api-approved.kubernetes.io"] == "" {
		t.Errorf("CRD %s is in a protected group but has no api-approved.kubernetes.io annotation", crd.Name)
	}
	if s.Scope != apiextensionsv1.NamespaceScoped && s.Scope != apiextensionsv1.ClusterScoped {
		t.Errorf("CRD %s: scope %q", crd.Name, s.Scope)
	}
	if len(s.Versions) != 1 {
		t.Fatalf("CRD %s: %d versions", crd.Name, len(s.Versions))
	}
	v := s.Versions[0]
	if !v.Served || !v.Storage || v.Name == "" || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil ||
		v.Schema.OpenAPIV3Schema.Type != "object" || v.Schema.OpenAPIV3Schema.XPreserveUnknownFields == nil ||
		!*v.Schema.OpenAPIV3Schema.XPreserveUnknownFields || v.Subresources == nil || v.Subresources.Status == nil {
		t.Errorf("CRD %s: version %+v", crd.Name, v)
	}
}

func TestEveryFlavoursCRDsAreValid(t *testing.T) {
	for _, distro := range Distros() {
		t.Run(distro, func(t *testing.T) {
			f, _ := For(distro)
			seen := map[string]bool{}
			for _, crd := range f.CRDs() {
				checkCRD(t, crd)
				if seen[crd.Name] {
					t.Errorf("CRD %s twice", crd.Name)
				}
				seen[crd.Name] = true
			}
		})
	}
}

// builtInKinds are the built-in kinds flavours create, by apiVersion and kind, and whether they are
// namespaced.
var builtInKinds = map[string]bool{
	"v1/Namespace": false, "v1/ConfigMap": true, "v1/ResourceQuota": true, "apps/v1/DaemonSet": true,
	"node.k8s.io/v1/RuntimeClass": false, "apiextensions.k8s.io/v1/CustomResourceDefinition": false,
}

func TestEveryFlavoursObjectsCanBeCreatedInOrder(t *testing.T) {
	for _, distro := range Distros() {
		f, _ := For(distro)
		for _, s := range scenarios(distro) {
			t.Run(fmt.Sprintf("%s %+v", distro, s), func(t *testing.T) {
				kinds := map[string]bool{}
				for k, v := range builtInKinds {
					kinds[k] = v
				}
				for _, crd := range f.CRDs() {
					kinds[crd.Spec.Group+"/"+crd.Spec.Versions[0].Name+"/"+crd.Spec.Names.Kind] = crd.Spec.Scope == apiextensionsv1.NamespaceScoped
				}
				namespaces := map[string]bool{"default": true, "kube-system": true}
				names := map[string]bool{}
				for _, o := range f.Objects(s) {
					key := o.GetAPIVersion() + "/" + o.GetKind()
					namespaced, known := kinds[key]
					if !known {
						t.Errorf("%s %s: kind not served", key, o.GetName())
						continue
					}
					if namespaced != (o.GetNamespace() != "") {
						t.Errorf("%s %s: namespace %q for a namespaced=%v kind", key, o.GetName(), o.GetNamespace(), namespaced)
					}
					if o.GetNamespace() != "" && !namespaces[o.GetNamespace()] {
						t.Errorf("%s %s: namespace %s is not created before it", key, o.GetName(), o.GetNamespace())
					}
					if o.GetKind() == "Namespace" {
						namespaces[o.GetName()] = true
					}
					id := key + " " + o.GetNamespace() + "/" + o.GetName()
					if names[id] || o.GetName() == "" {
						t.Errorf("%s: empty or duplicate", id)
					}
					names[id] = true
					if errs := content.IsDNS1123Subdomain(o.GetName()); len(errs) > 0 {
						t.Errorf("%s: name %v", id, errs)
					}
					for k, v := range o.GetLabels() {
						if errs := append(content.IsLabelKey(k), content.IsLabelValue(v)...); len(errs) > 0 {
							t.Errorf("%s: label %s=%q: %v", id, k, v, errs)
						}
					}
					o.DeepCopy() // panics on values that are not JSON-compatible
					if _, err := json.Marshal(o.Object); err != nil {
						t.Errorf("%s does not encode: %v", id, err)
					}
				}
			})
		}
	}
}

// findObject returns the object of kind and name among objs.
func findObject(t *testing.T, objs []unstructured.Unstructured, kind, name string) unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return unstructured.Unstructured{}
}

func TestFlavorOpenShiftObjects(t *testing.T) {
	f, _ := For("openshift")
	for _, tt := range []struct {
		kubelet, ocp, osID, ostreePrefix, kubeletPattern string
	}{
		{"v1.37.2", "4.24", "rhel", "9.6.", `^v1\.37\.2$`},
		{"v1.32.6", "4.19", "rhel", "9.6.", `^v1\.32\.6$`},
		{"v1.31.6", "4.18", "rhcos", "418.94.", `^v1\.31\.6$`},
		{"v1.29.5", "4.16", "rhcos", "416.94.", `^v1\.29\.5\+[0-9a-f]{7}$`},
	} {
		t.Run("Kubernetes "+tt.kubelet+" is OpenShift "+tt.ocp, func(t *testing.T) {
			s := Scenario{Distro: "openshift", KubeletVersion: tt.kubelet, NFDLabels: true}
			nodes := f.Nodes(s)
			for _, sim := range nodes {
				n := sim.Node
				if sim.Hardware.OSReleaseID != tt.osID || n.Labels["node.openshift.io/os_id"] != tt.osID ||
					!strings.HasPrefix(sim.Hardware.OSTreeVersion, tt.ostreePrefix) ||
					!regexp.MustCompile(tt.kubeletPattern).MatchString(n.Status.NodeInfo.KubeletVersion) ||
					!strings.Contains(n.Status.NodeInfo.ContainerRuntimeVersion, ".rhaos"+tt.ocp+".") {
					t.Errorf("%s: os %+v os_id %q kubelet %q runtime %q", n.Name, sim.Hardware, n.Labels["node.openshift.io/os_id"],
						n.Status.NodeInfo.KubeletVersion, n.Status.NodeInfo.ContainerRuntimeVersion)
				}
				if sim.Hardware.GPUs > 0 && n.Labels[nfd.LabelPrefix+"system-os_release.OSTREE_VERSION"] != sim.Hardware.OSTreeVersion {
					t.Errorf("%s: no OSTREE_VERSION label", n.Name)
				}
			}
			objs := f.Objects(s)

			cv := findObject(t, objs, "ClusterVersion", "version")
			history, _, _ := unstructured.NestedSlice(cv.Object, "status", "history")
			desired, _, _ := unstructured.NestedString(cv.Object, "status", "desired", "version")
			channel, _, _ := unstructured.NestedString(cv.Object, "spec", "channel")
			if len(history) == 0 || history[0].(map[string]any)["state"] != "Completed" ||
				history[0].(map[string]any)["version"] != desired || !strings.HasPrefix(desired, tt.ocp+".") || channel != "stable-"+tt.ocp {
				t.Errorf("ClusterVersion: channel %q desired %q history %v", channel, desired, history)
			}

			dtk := findObject(t, objs, "ImageStream", "driver-toolkit")
			tags, _, _ := unstructured.NestedSlice(dtk.Object, "spec", "tags")
			if dtk.GetNamespace() != "openshift" || len(tags) == 0 || tags[0].(map[string]any)["name"] != nodes[0].Hardware.OSTreeVersion {
				t.Errorf("driver-toolkit tags %v, nodes run %s", tags, nodes[0].Hardware.OSTreeVersion)
			}
		})
	}

	objs := f.Objects(Scenario{Distro: "openshift"})
	for _, ns := range []string{"openshift-marketplace", "openshift-operators", "openshift"} {
		findObject(t, objs, "Namespace", ns)
	}
	for _, o := range objs {
		if o.GetKind() == "Namespace" && (o.GetName() == "openshift-nfd" || o.GetName() == "nvidia-gpu-operator") {
			t.Errorf("a fresh cluster has no namespace %s", o.GetName())
		}
	}
	for _, tt := range []struct {
		pkg, catalog, defaultChannel, csvPrefix, exampleKind string
	}{
		{"gpu-operator-certified", "certified-operators", "v26.7", "gpu-operator-certified.v26.7.", "ClusterPolicy"},
		{"nfd", "redhat-operators", "stable", "nfd.4.24.0-", "NodeFeatureDiscovery"},
	} {
		t.Run("PackageManifest "+tt.pkg, func(t *testing.T) {
			pm := findObject(t, objs, "PackageManifest", tt.pkg)
			status := pm.Object["status"].(map[string]any)
			if pm.GetNamespace() != "openshift-marketplace" || status["catalogSource"] != tt.catalog || status["defaultChannel"] != tt.defaultChannel {
				t.Errorf("status %v", status)
			}
			findObject(t, objs, "CatalogSource", tt.catalog)
			var def map[string]any
			for _, c := range status["channels"].([]any) {
				if c := c.(map[string]any); c["name"] == tt.defaultChannel {
					def = c
				}
			}
			if def == nil || !strings.HasPrefix(def["currentCSV"].(string), tt.csvPrefix) {
				t.Fatalf("default channel %v", def)
			}
			almExamples, _, _ := unstructured.NestedString(def, "currentCSVDesc", "annotations", "alm-examples")
			var examples []map[string]any
			if err := json.Unmarshal([]byte(almExamples), &examples); err != nil || len(examples) == 0 || examples[0]["kind"] != tt.exampleKind {
				t.Fatalf("alm-examples %q: %v", almExamples, err)
			}
			if tt.exampleKind == "ClusterPolicy" {
				spec := examples[0]["spec"].(map[string]any)
				// The blocks the ClusterPolicy CRD requires (NVIDIA/gpu-operator deployments/gpu-operator/crds/nvidia.com_clusterpolicies.yaml@v26.7.0).
				for _, block := range []string{"daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "driver", "gfd", "nodeStatusExporter", "operator", "toolkit"} {
					if _, ok := spec[block]; !ok {
						t.Errorf("alm-example ClusterPolicy lacks spec.%s", block)
					}
				}
				if examples[0]["metadata"].(map[string]any)["name"] != "gpu-cluster-policy" {
					t.Errorf("alm-example ClusterPolicy is named %v", examples[0]["metadata"])
				}
			}
		})
	}
}

func TestFlavorKubeadmConfigRecordsTheVersion(t *testing.T) {
	for distro, want := range map[string]string{"kubeadm": "kubernetesVersion: v1.33.4\n", "tkgs": "kubernetesVersion: v1.33.4+vmware.1\n"} {
		f, _ := For(distro)
		cm := findObject(t, f.Objects(Scenario{Distro: distro, KubeletVersion: "v1.33.4"}), "ConfigMap", "kubeadm-config")
		cc, _, _ := unstructured.NestedString(cm.Object, "data", "ClusterConfiguration")
		if cm.GetNamespace() != "kube-system" || !strings.Contains(cc, want) {
			t.Errorf("%s: kubeadm-config %q lacks %q", distro, cc, want)
		}
	}
}

func TestFlavorRancherDistributionsShipAnNvidiaRuntimeClass(t *testing.T) {
	for _, distro := range []string{"rke2", "k3s"} {
		f, _ := For(distro)
		rc := findObject(t, f.Objects(Scenario{Distro: distro}), "RuntimeClass", "nvidia")
		if rc.Object["handler"] != "nvidia" {
			t.Errorf("%s: RuntimeClass nvidia %v", distro, rc.Object)
		}
	}
}

func TestFlavorKubeadmControlPlaneFollowsKubeadmsHistory(t *testing.T) {
	for _, tt := range []struct {
		minor          int
		labels, taints []string
	}{
		{19, []string{"master"}, []string{"master"}},
		{22, []string{"control-plane", "master"}, []string{"master"}},
		{24, []string{"control-plane"}, []string{"control-plane", "master"}},
		{37, []string{"control-plane"}, []string{"control-plane"}},
	} {
		t.Run(fmt.Sprintf("v1.%d", tt.minor), func(t *testing.T) {
			labels, taints := kubeadmControlPlane(tt.minor)
			var gotLabels, gotTaints []string
			for k := range labels {
				if role, ok := strings.CutPrefix(k, "node-role.kubernetes.io/"); ok {
					gotLabels = append(gotLabels, role)
				}
			}
			for _, taint := range taints {
				gotTaints = append(gotTaints, strings.TrimPrefix(taint.Key, "node-role.kubernetes.io/"))
			}
			slices.Sort(gotLabels)
			slices.Sort(gotTaints)
			if !slices.Equal(gotLabels, tt.labels) || !slices.Equal(gotTaints, tt.taints) {
				t.Errorf("labels %v taints %v, want %v %v", gotLabels, gotTaints, tt.labels, tt.taints)
			}
		})
	}
}

// TestFlavorAdmissionPluginsAreThePlatforms: ExtendedResourceToleration, which adds the GPU toleration to
// pods that request GPUs, is on exactly where the platform turns it on (GKE, EKS, AKS); upstream
// Kubernetes leaves it off, and so do kubeadm, k3s, RKE2 and the rest.
func TestFlavorAdmissionPluginsAreThePlatforms(t *testing.T) {
	want := map[string]bool{"gke": true, "eks": true, "aks": true}
	for _, name := range Distros() {
		f, err := For(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(f.AdmissionPlugins, "ExtendedResourceToleration"); got != want[name] {
			t.Errorf("%s: ExtendedResourceToleration on %v, want %v", name, got, want[name])
		}
	}
}

// TestFlavorGPUControlPlane: a single-node k3s box whose server is the GPU node, and kubeadm with GPU
// workers and no CPU worker.
func TestFlavorGPUControlPlane(t *testing.T) {
	t.Run("a single-node k3s box: one untainted server with the GPU", func(t *testing.T) {
		f, _ := For("k3s")
		nodes := f.Nodes(Scenario{Distro: "k3s", GPUControlPlane: true})
		if len(nodes) != 1 {
			t.Fatalf("%d nodes, want the server alone", len(nodes))
		}
		n := nodes[0]
		if n.Node.Labels["node-role.kubernetes.io/control-plane"] != "true" || len(n.Node.Spec.Taints) != 0 {
			t.Errorf("server labels %v, taints %v", n.Node.Labels, n.Node.Spec.Taints)
		}
		if n.Hardware.GPUs != 1 || n.Hardware.GPUProduct == "" || n.Hardware.GPUPCIClass != "0302" {
			t.Errorf("server hardware %+v, want a GPU", n.Hardware)
		}
	})
	t.Run("with NFD labels already there, the GPU server carries them", func(t *testing.T) {
		f, _ := For("k3s")
		n := f.Nodes(Scenario{Distro: "k3s", GPUControlPlane: true, NFDLabels: true})[0]
		if n.Node.Labels["feature.node.kubernetes.io/pci-10de.present"] != "true" {
			t.Errorf("labels %v", n.Node.Labels)
		}
	})
	t.Run("kubeadm with GPU workers only: a tainted control plane and two GPU workers", func(t *testing.T) {
		f, _ := For("kubeadm")
		nodes := f.Nodes(Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 0})
		if len(nodes) != 3 || len(nodes[0].Node.Spec.Taints) != 1 || nodes[0].Hardware.GPUs != 0 || nodes[1].Hardware.GPUs != 1 || nodes[2].Hardware.GPUs != 1 {
			t.Errorf("nodes %+v", nodes)
		}
	})
}

// TestGPUNodeOSGivesGPUWorkersTheirKernels: GPU worker i runs GPUNodeOS[i], in nodeInfo, the hardware
// the stand-ins read and NFD's labels; the workers past the list and the other nodes keep the flavour's.
func TestGPUNodeOSGivesGPUWorkersTheirKernels(t *testing.T) {
	f, err := For("kubeadm")
	if err != nil {
		t.Fatal(err)
	}
	s := Scenario{GPUNodes: 3, CPUNodes: 1, NFDLabels: true, GPUNodeOS: []NodeOS{Ubuntu("24.04.2", "6.8.0-60-generic"), Ubuntu("24.04.2", "6.8.0-1017-aws")}}
	kernels := map[string]string{}
	for _, n := range f.Nodes(s) {
		info := n.Node.Status.NodeInfo
		kernels[n.Node.Name] = info.KernelVersion + " " + info.OSImage
		if n.Node.Name == "gpu-worker-2" {
			if n.Hardware.OSVersionID != "24.04" || n.Node.Labels["feature.node.kubernetes.io/kernel-version.full"] != "6.8.0-1017-aws" {
				t.Errorf("gpu-worker-2: hardware %+v, kernel label %q", n.Hardware, n.Node.Labels["feature.node.kubernetes.io/kernel-version.full"])
			}
		}
	}
	want := map[string]string{
		"kube-cp-1":    "5.15.0-153-generic Ubuntu 22.04.5 LTS",
		"gpu-worker-1": "6.8.0-60-generic Ubuntu 24.04.2 LTS",
		"gpu-worker-2": "6.8.0-1017-aws Ubuntu 24.04.2 LTS",
		"gpu-worker-3": "5.15.0-153-generic Ubuntu 22.04.5 LTS",
		"cpu-worker-1": "5.15.0-153-generic Ubuntu 22.04.5 LTS",
	}
	if !reflect.DeepEqual(kernels, want) {
		t.Errorf("kernels and OS images\n got %v\nwant %v", kernels, want)
	}
}
