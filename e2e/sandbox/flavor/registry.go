package flavor

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

const (
	defaultDistro         = "kubeadm"
	defaultKubeletVersion = "v1.37.2" // the sandbox control plane's version (the k8s.io/kubernetes release the sandbox builds its servers from)

	// kwokNodeAnnotation marks the nodes kwok manages; kwok ignores nodes without it.
	kwokNodeAnnotation = "kwok.x-k8s.io/node"

	labelGPUDeployDriver = "nvidia.com/gpu.deploy.driver"
	taintGPU             = "nvidia.com/gpu"
)

// flavors lists every distribution, in the order Distros reports them.
func flavors() []Flavor {
	return []Flavor{
		openshiftFlavor(), gkeFlavor(), tkgsFlavor(), rke2Flavor(), k3sFlavor(),
		eksFlavor(), aksFlavor(), microk8sFlavor(), kubeadmFlavor(),
	}
}

// Distros returns the names of the distributions the sandbox can simulate.
func Distros() []string {
	var names []string
	for _, f := range flavors() {
		names = append(names, f.Name)
	}
	return names
}

// For returns the flavour of the named distribution.
func For(name string) (Flavor, error) {
	for _, f := range flavors() {
		if f.Name == name {
			return f, nil
		}
	}
	return Flavor{}, fmt.Errorf("unknown distribution %q: want one of %s", name, strings.Join(Distros(), ", "))
}

// Defaults fills in what the scenario leaves unset and returns the result; explicit values are kept.
//
//   - Distro "" becomes "kubeadm" (and is lower-cased).
//   - GPUNodes and CPUNodes are defaulted only together: 0 and 0 means 2 GPU nodes and 1 CPU node. Any
//     other pair is taken as given, so a cluster with GPU nodes only is GPUNodes: n, CPUNodes: 0. With
//     GPUControlPlane, 0 and 0 is taken as given too: the GPU server alone.
//   - GPUsPerNode 0 becomes 1.
//   - KubeletVersion "" becomes the control plane's version, v1.37.2; a missing leading "v" is added.
//   - On gke, GKEAutopilot implies GKEDevicePlugin: Autopilot always installs the driver and runs
//     GKE's own device plugin on GPU nodes.
func (s Scenario) Defaults() Scenario {
	s.Distro = strings.ToLower(strings.TrimSpace(s.Distro))
	if s.Distro == "" {
		s.Distro = defaultDistro
	}
	if s.GPUNodes == 0 && s.CPUNodes == 0 && !s.GPUControlPlane {
		s.GPUNodes, s.CPUNodes = 2, 1
	}
	if s.GPUsPerNode == 0 {
		s.GPUsPerNode = 1
	}
	switch {
	case s.KubeletVersion == "":
		s.KubeletVersion = defaultKubeletVersion
	case !strings.HasPrefix(s.KubeletVersion, "v"):
		s.KubeletVersion = "v" + s.KubeletVersion
	}
	if s.GKEAutopilot && s.Distro == "gke" {
		s.GKEDevicePlugin = true
	}
	return s
}

// kubeMinor is the Kubernetes minor version of the scenario's kubelets (37 for v1.37.2).
func (s Scenario) kubeMinor() int {
	v, err := version.ParseGeneric(s.KubeletVersion)
	if err != nil {
		return 37
	}
	return int(v.Minor())
}

// kubePatch is the patch level of the scenario's kubelets (2 for v1.37.2).
func (s Scenario) kubePatch() int {
	v, err := version.ParseGeneric(s.KubeletVersion)
	if err != nil {
		return 0
	}
	return int(v.Patch())
}
