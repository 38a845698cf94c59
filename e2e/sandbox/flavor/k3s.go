package flavor

import (
	"fmt"
	"maps"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// k3sFlavor is a k3s cluster: one server (SQLite datastore, so no etcd role) and agents. Facts from
// replicatedhq/troubleshoot pkg/analyze/distribution.go, node dumps in NVIDIA/gpu-operator issues and the k3s docs
// (k3s-io/docs docs/advanced/advanced.md): kubelet "+k3s1", containerd "…-k3s1", node
// annotations k3s.io/*, instance-type "k3s" and k3s:// provider IDs from the embedded cloud controller,
// servers labelled control-plane and master "true" and not tainted, flannel's node annotations, the
// helm.cattle.io and k3s.cattle.io APIs, and the RuntimeClasses k3s ships in its runtimes.yaml manifest.
func k3sFlavor() Flavor {
	d := rancherDistro{
		name:          "k3s",
		kubeletSuffix: "+k3s1",
		runtime:       "containerd://2.1.4-k3s1",
		os:            ubuntu("24.04.3", "6.8.0-85-generic"),
		serverRoles:   []string{"control-plane", "master"},
		serverArgs:    []string{"server", "--write-kubeconfig-mode", "0644"},
		joinPort:      6443,
		gpu:           standin.GPUT4,
	}
	return Flavor{
		Name:        "k3s",
		Description: "k3s (Ubuntu 24.04, embedded containerd, flannel)",
		// The k3s server runs kube-apiserver with --enable-admission-plugins=NodeRestriction only
		// (k3s-io/k3s pkg/daemons/control/server.go): no ExtendedResourceToleration.
		AdmissionPlugins: []string{"NodeRestriction"},
		Nodes:            d.nodes,
		CRDs: func() []apiextensionsv1.CustomResourceDefinition {
			return newCRDs(append(rancherCRDs(),
				// Traefik is k3s's default ingress controller; its chart installs these.
				crdSpec{"traefik.io", "v1alpha1", "IngressRoute", "ingressroutes", false},
				crdSpec{"traefik.io", "v1alpha1", "Middleware", "middlewares", false},
			)...)
		},
		Objects: func(Scenario) []unstructured.Unstructured {
			// The k3s server deploys every file in /var/lib/rancher/k3s/server/manifests as an Addon;
			// traefik.yaml holds HelmCharts.
			objs := addonObjects("k3s", "ccm", "coredns", "local-storage", "rolebindings", "runtimes", "traefik")
			objs = append(objs,
				helmChartObject("traefik-crd", map[string]any{"chart": "https://%{KUBERNETES_API}%/static/charts/traefik-crd.tgz"}),
				helmChartObject("traefik", map[string]any{"chart": "https://%{KUBERNETES_API}%/static/charts/traefik.tgz"}),
			)
			// From runtimes.yaml (k3s-io/k3s#8700); its WebAssembly runtime classes (spin, wasmedge, …) are left out.
			return append(objs, runtimeClassObject("nvidia"), runtimeClassObject("nvidia-experimental"), runtimeClassObject("crun"))
		},
	}
}

// rancherDistro is what differs between k3s and RKE2, which share k3s's agent code.
type rancherDistro struct {
	name          string // "k3s" or "rke2": annotation prefix, instance type, provider ID scheme, node names
	kubeletSuffix string
	runtime       string
	os            osRelease
	serverRoles   []string // node-role.kubernetes.io/<role>=true on servers
	serverArgs    []string // the server's command line as the node-args annotation records it
	joinPort      int      // the port agents join the server on
	gpu           string
	extraLabels   map[string]string // on every node
	etcd          bool              // servers run embedded etcd and carry its annotations
}

// nodes are the scenario's nodes: servers, then GPU agents, then CPU agents, on an on-premises
// network. Neither k3s nor RKE2 taints its servers.
func (d rancherDistro) nodes(s Scenario) []SimNode {
	s = s.Defaults()
	const serverIP = "10.20.0.10"
	return buildNodes(s, 1, func(r role, i int) nodeSpec {
		var name, ip string
		var m machine
		args := []string{"agent", "--server", fmt.Sprintf("https://%s:%d", serverIP, d.joinPort), "--token", "********"}
		labels := map[string]string{}
		switch r {
		case controlPlane:
			name, ip, m, args = fmt.Sprintf("%s-server-%d", d.name, i+1), ipv4(serverIP, i), server(8, 32), d.serverArgs
			if s.GPUControlPlane {
				m = gpuServer(d.gpu, s.GPUsPerNode)
			}
			for _, role := range d.serverRoles {
				labels["node-role.kubernetes.io/"+role] = "true"
			}
		case gpuWorker:
			name, ip, m = fmt.Sprintf("%s-gpu-%d", d.name, i+1), ipv4("10.20.1.10", i), gpuServer(d.gpu, s.GPUsPerNode)
		case cpuWorker:
			name, ip, m = fmt.Sprintf("%s-agent-%d", d.name, i+1), ipv4("10.20.2.10", i), server(16, 64)
		}
		// The embedded cloud controller sets instance type "k3s"/"rke2" and the provider ID.
		m.instanceType = d.name
		maps.Copy(labels, d.extraLabels)
		prefix := d.name + ".io/" // rke2.io/…, k3s.io/…
		annotations := map[string]string{
			prefix + "node-args":        jsonString(args),
			prefix + "hostname":         name,
			prefix + "internal-ip":      ip,
			prefix + "node-config-hash": token(name+"/config", 52, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") + "====",
			// flannel (k3s's CNI, and the overlay in RKE2's default canal) records its VXLAN endpoint.
			"flannel.alpha.coreos.com/backend-type":        "vxlan",
			"flannel.alpha.coreos.com/backend-data":        jsonString(map[string]any{"VNI": 1, "VtepMAC": macToken(name)}),
			"flannel.alpha.coreos.com/kube-subnet-manager": "true",
			"flannel.alpha.coreos.com/public-ip":           ip,
		}
		if d.etcd && r == controlPlane {
			annotations["etcd."+d.name+".cattle.io/node-name"] = name + "-" + hexToken(name+"/etcd", 8)
			annotations["etcd."+d.name+".cattle.io/node-address"] = ip
		}
		return nodeSpec{
			name:        name,
			machine:     m,
			os:          d.os,
			runtime:     d.runtime,
			kubelet:     s.KubeletVersion + d.kubeletSuffix,
			providerID:  d.name + "://" + name,
			labels:      labels,
			annotations: annotations,
		}
	})
}

// macToken is a locally administered MAC address derived from seed.
func macToken(seed string) string {
	h := hexToken(seed+"/mac", 10)
	return "ba:" + h[0:2] + ":" + h[2:4] + ":" + h[4:6] + ":" + h[6:8] + ":" + h[8:10]
}

// rancherCRDs are the APIs k3s and RKE2 both serve: the helm-controller's HelmChart and
// HelmChartConfig, and k3s's Addon (one per file in the server's manifests directory) and
// ETCDSnapshotFile.
func rancherCRDs() []crdSpec {
	return []crdSpec{
		{"helm.cattle.io", "v1", "HelmChart", "helmcharts", false},
		{"helm.cattle.io", "v1", "HelmChartConfig", "helmchartconfigs", false},
		{"k3s.cattle.io", "v1", "Addon", "addons", false},
		{"k3s.cattle.io", "v1", "ETCDSnapshotFile", "etcdsnapshotfiles", true},
	}
}

// addonObjects are the Addons the server creates in kube-system for its manifests directory.
func addonObjects(distro string, names ...string) []unstructured.Unstructured {
	var objs []unstructured.Unstructured
	for _, name := range names {
		objs = append(objs, object("k3s.cattle.io/v1", "Addon", "kube-system", name, map[string]any{
			"spec": map[string]any{
				"source":   fmt.Sprintf("/var/lib/rancher/%s/server/manifests/%s.yaml", distro, name),
				"checksum": hexToken(distro+"/"+name, 64),
			},
		}))
	}
	return objs
}

// helmChartObject is a HelmChart in kube-system, as k3s and RKE2 deploy their bundled components.
func helmChartObject(name string, spec map[string]any) unstructured.Unstructured {
	return object("helm.cattle.io/v1", "HelmChart", "kube-system", name, map[string]any{"spec": spec})
}
