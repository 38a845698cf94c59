package sandbox

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// Every flavour, brought up for real: what a client reads back from the API server is what the
// flavour says the platform reports — nothing dropped by the API server, nothing overwritten by kwok —
// its API groups are served and its objects exist.
func TestFlavoursLookRealThroughTheAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real Kubernetes control plane per distribution; skipped in -short mode")
	}
	for _, distro := range Distros() {
		t.Run(distro, func(t *testing.T) {
			c := StartT(t, Options{Scenario: Scenario{Distro: distro, GPUNodes: 2, CPUNodes: 1, NFDLabels: true}, NoOperator: true})
			ctx := t.Context()
			nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]corev1.Node{}
			for _, n := range nodes.Items {
				got[n.Name] = n
			}
			if len(got) != len(c.Nodes) {
				t.Fatalf("the API lists %d nodes, the flavour made %d", len(got), len(c.Nodes))
			}
			gpuNodes := 0
			for _, sim := range c.Nodes {
				want := sim.Node
				n, ok := got[want.Name]
				if !ok {
					t.Errorf("node %s missing", want.Name)
					continue
				}
				if sim.Hardware.GPUs > 0 {
					gpuNodes++
				}
				for k, v := range want.Labels {
					if n.Labels[k] != v {
						t.Errorf("node %s: label %s=%q, want %q", n.Name, k, n.Labels[k], v)
					}
				}
				for k, v := range want.Annotations {
					if n.Annotations[k] != v {
						t.Errorf("node %s: annotation %s=%q, want %q", n.Name, k, n.Annotations[k], v)
					}
				}
				if n.Spec.ProviderID != want.Spec.ProviderID {
					t.Errorf("node %s: providerID %q, want %q", n.Name, n.Spec.ProviderID, want.Spec.ProviderID)
				}
				for _, taint := range want.Spec.Taints {
					if !slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&taint) }) {
						t.Errorf("node %s lost taint %v", n.Name, taint)
					}
				}
				wi, gi := want.Status.NodeInfo, n.Status.NodeInfo
				if gi.KubeletVersion != wi.KubeletVersion || gi.OSImage != wi.OSImage || gi.ContainerRuntimeVersion != wi.ContainerRuntimeVersion || gi.KernelVersion != wi.KernelVersion {
					t.Errorf("node %s: nodeInfo %+v, want %+v", n.Name, gi, wi)
				}
				if !nodeReady(&n) {
					t.Errorf("node %s not Ready", n.Name)
				}
				if _, has := n.Status.Capacity["nvidia.com/gpu"]; has {
					t.Errorf("node %s advertises nvidia.com/gpu with no device plugin running", n.Name)
				}
			}
			if gpuNodes != 2 {
				t.Errorf("%d GPU nodes, want 2", gpuNodes)
			}

			disc := discovery.NewDiscoveryClientForConfigOrDie(c.Config)
			groups, err := disc.ServerGroups()
			if err != nil {
				t.Fatal(err)
			}
			served := map[string]bool{}
			for _, g := range groups.Groups {
				served[g.Name] = true
			}
			if c.Flavor.CRDs != nil {
				for _, crd := range c.Flavor.CRDs() {
					if !served[crd.Spec.Group] {
						t.Errorf("API group %s is not served", crd.Spec.Group)
					}
				}
			}
			if c.Flavor.Objects != nil {
				dyn := dynamic.NewForConfigOrDie(c.Config)
				mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
				for _, obj := range c.Flavor.Objects(c.Scenario) {
					gvk := obj.GroupVersionKind()
					m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
					if err != nil {
						t.Errorf("%s: %v", gvk, err)
						continue
					}
					ri := dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
					stored, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
					if err != nil {
						t.Errorf("%s %s/%s: %v", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
						continue
					}
					if _, want := obj.Object["status"]; want {
						if _, has := stored.Object["status"]; !has {
							t.Errorf("%s %s lost its status", gvk.Kind, obj.GetName())
						}
					}
				}
			}
		})
	}
}

// The NFD stand-in (which the benches use; other sandboxes run NFD's own programs) labels nodes once an NFD master and a worker run, with the label form the worker's
// configuration asks for, and takes its labels away when NFD is uninstalled.
func TestNFDStandInLabelsNodesLikeNFD(t *testing.T) {
	c := StartT(t, Options{Scenario: Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1}, NoOperator: true, NFDStandIn: true})
	ctx := t.Context()
	gpu, cpu := gpuNodeNames(c)
	const ns = "default"
	const pciLabel = "feature.node.kubernetes.io/pci-10de.present"
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "nfd-worker-conf", Namespace: ns},
		Data:       map[string]string{"nfd-worker.conf": "sources:\n  pci:\n    deviceClassWhitelist: [\"02\", \"0200\", \"0207\", \"0300\", \"0302\"]\n    deviceLabelFields: [vendor]\n"},
	}
	if _, err := c.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	worker := daemonSet("nfd-worker", true, nil)
	worker.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	worker.Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/nfd/node-feature-discovery:v0.19.0"
	worker.Spec.Template.Spec.Containers[0].Command = []string{"nfd-worker"}
	worker.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/kubernetes/node-feature-discovery"}}
	worker.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}, Items: []corev1.KeyToPath{{Key: "nfd-worker.conf", Path: "nfd-worker.conf"}}}}}}
	labels := map[string]string{"app": "nfd-master"}
	master := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "nfd-master", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nfd-master", Image: "registry.k8s.io/nfd/node-feature-discovery:v0.19.0", Command: []string{"nfd-master"}}}},
			},
		},
	}
	if _, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, master, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kube.AppsV1().DaemonSets(ns).Create(ctx, worker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labelled := func(want bool) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			// The stand-in labels node by node: wait until every node is done, not just the GPU ones.
			for _, n := range nodes.Items {
				if slices.Contains(gpu, n.Name) && (n.Labels[pciLabel] == "true") != want {
					return false, nil
				}
				if (n.Labels["feature.node.kubernetes.io/kernel-version.full"] != "") != want {
					return false, nil
				}
			}
			return true, nil
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, labelled(true)); err != nil {
		t.Fatalf("GPU nodes did not get %s: %v", pciLabel, err)
	}
	before := map[string]map[string]string{}
	nodes, _ := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	for _, n := range nodes.Items {
		before[n.Name] = maps.Clone(n.Labels)
		if slices.Contains(cpu, n.Name) && n.Labels[pciLabel] != "" {
			t.Errorf("CPU node %s got %s", n.Name, pciLabel)
		}
		if n.Labels["feature.node.kubernetes.io/kernel-version.full"] == "" {
			t.Errorf("node %s has no kernel-version.full label", n.Name)
		}
	}

	if err := c.Kube.AppsV1().DaemonSets(ns).Delete(ctx, "nfd-worker", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, labelled(false)); err != nil {
		t.Fatalf("labels stayed after NFD was uninstalled: %v", err)
	}
	nodes, _ = c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	for _, n := range nodes.Items {
		for k := range n.Labels {
			if _, had := before[n.Name][k]; !had {
				t.Errorf("node %s gained label %s after uninstall", n.Name, k)
			}
		}
		for _, sim := range c.Nodes {
			if sim.Node.Name != n.Name {
				continue
			}
			for k, v := range sim.Node.Labels {
				if n.Labels[k] != v {
					t.Errorf("node %s: the stand-in removed or changed label %s it did not set", n.Name, k)
				}
			}
		}
	}
}
