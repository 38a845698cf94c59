package flavor

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// rke2Flavor is an RKE2 cluster: one server with embedded etcd, and agents. Facts from the server's
// labels and capacity in a user's published RKE2 GPU walk-through (RKE2 v1.24.9+rke2r2: roles control-plane, etcd and master
// "true", instance-type "rke2", egress.rke2.io/cluster=true, 110 pods, no taint) and
// https://docs.rke2.io/add-ons/gpu_operators and replicatedhq/troubleshoot pkg/analyze/distribution.go (annotations rke2.io/*, etcd.rke2.cattle.io/*, rke2:// provider IDs,
// containerd "2.1.4-k3s1", the helm.cattle.io API). RKE2 is built on k3s's agent and deploy controller,
// so it serves k3s.cattle.io Addons too (one per manifest it deploys), installs the external-snapshotter
// CRDs (rke2-snapshot-controller-crd), and ships the RuntimeClasses of its rke2-runtimeclasses chart
// (rancher/rke2-charts#384), which include "nvidia".
func rke2Flavor() Flavor {
	d := rancherDistro{
		name:          "rke2",
		kubeletSuffix: "+rke2r1",
		runtime:       "containerd://2.1.4-k3s1",
		os:            ubuntu("22.04.5", "5.15.0-153-generic"),
		serverRoles:   []string{"control-plane", "etcd", "master"},
		serverArgs:    []string{"server", "--write-kubeconfig-mode", "0644", "--cni", "canal"},
		joinPort:      9345, // RKE2's supervisor port
		gpu:           standin.GPUL40S,
		// Seen on the walk-through's server; RKE2's egress selector labels every node it manages (uncertain
		// for agents).
		extraLabels: map[string]string{"egress.rke2.io/cluster": "true"},
		etcd:        true,
	}
	charts := []struct {
		name      string
		bootstrap bool // installed before the CNI is up, with host networking
	}{
		{"rke2-canal", true},
		{"rke2-coredns", true},
		{"rke2-ingress-nginx", false},
		{"rke2-metrics-server", false},
		{"rke2-runtimeclasses", false},
		{"rke2-snapshot-controller-crd", false},
		{"rke2-snapshot-controller", false},
	}
	return Flavor{
		Name:        "rke2",
		Description: "RKE2 (Ubuntu 22.04, embedded containerd, canal)",
		// RKE2 runs k3s's control-plane code, which enables NodeRestriction only (k3s-io/k3s
		// pkg/daemons/control/server.go): no ExtendedResourceToleration.
		AdmissionPlugins: []string{"NodeRestriction"},
		Nodes:            d.nodes,
		CRDs: func() []apiextensionsv1.CustomResourceDefinition {
			return newCRDs(append(rancherCRDs(), snapshotCRDs()...)...)
		},
		Objects: func(Scenario) []unstructured.Unstructured {
			var names []string
			var objs []unstructured.Unstructured
			for _, c := range charts {
				names = append(names, c.name)
				// The real HelmCharts carry the chart tarball inline (spec.chartContent); the sandbox
				// leaves it out.
				objs = append(objs, helmChartObject(c.name, map[string]any{"bootstrap": c.bootstrap}))
			}
			objs = append(addonObjects("rke2", names...), objs...)
			return append(objs, runtimeClassObject("nvidia"), runtimeClassObject("nvidia-experimental"), runtimeClassObject("crun"))
		},
	}
}
