package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/driverimage"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/render"
)

// TestPrecompiledAuto: three GPU nodes on two kernels, and the sandbox's real OCI registry as the
// --registry mirror, holding NVIDIA's precompiled driver image (branch 595) for one kernel only.
// install --precompiled auto plans per node: the generic kernel's two nodes get the precompiled
// driver through NVIDIADriver kernel-6.8.0-60-generic, the AWS kernel's node the driver built on the
// node through NVIDIADriver default. NVIDIA's real v26.7.0 controller reconciles both NVIDIADrivers:
// it routes each node to one of them, runs a driver DaemonSet per node pool with the image each
// needs, and reports both ready. A second install changes nothing; upgrade asks the registry again
// and moves the node whose image has since appeared; uninstall takes the NVIDIADrivers away and gives
// the nodes back as they were.
func TestPrecompiledAuto(t *testing.T) {
	t.Parallel()
	c, generic, aws := twoKernels(t, false)
	if err := c.PushImage(context.Background(), "nvidia/driver", driverimage.PrecompiledTag("595", generic.Kernel, "ubuntu24.04")); err != nil {
		t.Fatal(err)
	}
	repo := c.RegistryHost + "/nvidia/driver"
	nodesBefore := nodesMetadata(t, c)
	args := []string{"--precompiled", "auto", "--registry", c.RegistryHost, "--set", "driver.version=595.91.07"}
	precompiledDriver, compiledDriver := "kernel-6.8.0-60-generic", "default"

	t.Run("the dry run shows each node's driver", func(t *testing.T) {
		before := clusterState(t, c)
		code, stdout, stderr := gpuctl(t, c, append([]string{"install", "--dry-run"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		rows := map[string]string{}
		for _, line := range strings.Split(stdout, "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "gpu-worker-") {
				rows[f[0]] = strings.Join(f, " ")
			}
		}
		for node, want := range map[string]string{
			"gpu-worker-1": "gpu-worker-1 6.8.0-60-generic precompiled NVIDIADriver " + precompiledDriver + " " + repo + ":595-6.8.0-60-generic-ubuntu24.04",
			"gpu-worker-2": "gpu-worker-2 6.8.0-60-generic precompiled NVIDIADriver " + precompiledDriver + " " + repo + ":595-6.8.0-60-generic-ubuntu24.04",
			"gpu-worker-3": "gpu-worker-3 6.8.0-1017-aws compiled NVIDIADriver " + compiledDriver + " no " + repo + ":595-6.8.0-1017-aws-ubuntu24.04",
		} {
			if rows[node] != want {
				t.Errorf("the plan shows %s as %q, want %q:\n%s", node, rows[node], want, stdout)
			}
		}
		assertUnchanged(t, before, clusterState(t, c))
	})

	t.Run("images lists the precompiled image of each kernel that has one, and the compiled driver", func(t *testing.T) {
		code, stdout, stderr := gpuctl(t, c, append([]string{"images", "-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var list render.ImageList
		if err := json.Unmarshal([]byte(stdout), &list); err != nil {
			t.Fatal(err)
		}
		var drivers []string
		for _, im := range list.Images {
			if strings.Contains(im.Image, "/nvidia/driver:") {
				drivers = append(drivers, im.Image)
			}
		}
		if want := []string{repo + ":595-6.8.0-60-generic-ubuntu24.04", repo + ":595.91.07-ubuntu24.04"}; !slices.Equal(drivers, want) {
			t.Errorf("driver images %v, want %v", drivers, want)
		}
	})

	t.Run("a registry that does not answer: a warning, and the driver built everywhere", func(t *testing.T) {
		code, stdout, stderr := gpuctl(t, c, "install", "--dry-run", "-o", "json", "--timeout", "20s", "--precompiled", "auto", "--registry", silentRegistry(t))
		if code != 0 {
			t.Fatalf("exit %d within --timeout 20s: %s", code, stderr)
		}
		var p plan.Plan
		if err := json.Unmarshal([]byte(stdout), &p); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(p.Warnings, func(w string) bool {
			return strings.Contains(w, "--precompiled auto: cannot list the tags of") && strings.Contains(w, "every GPU node builds its driver")
		}) {
			t.Errorf("warnings %q: want the registry's silence named", p.Warnings)
		}
		if len(p.Drivers) != 3 || slices.ContainsFunc(p.Drivers, func(d plan.NodeDriver) bool { return d.Precompiled }) {
			t.Errorf("drivers %+v: want all three compiled", p.Drivers)
		}
	})

	t.Run("install: the real controller reconciles one NVIDIADriver per choice", func(t *testing.T) {
		res, _ := installJSON(t, c, args...)
		byNode := map[string]plan.NodeDriver{}
		for _, d := range res.Plan.Drivers {
			byNode[d.Node] = d
		}
		if !byNode["gpu-worker-1"].Precompiled || !byNode["gpu-worker-2"].Precompiled || byNode["gpu-worker-3"].Precompiled {
			t.Errorf("plan drivers %+v: want gpu-worker-1 and -2 precompiled, gpu-worker-3 compiled", res.Plan.Drivers)
		}
		assertRealController(t, c, "v26.7.0")
		dyn := dynamicClient(t, c)
		// NVIDIA's controller routes every GPU node to one NVIDIADriver (its owner label) and
		// reports each NVIDIADriver ready once the driver pods of its node pools are.
		owners := map[string]string{}
		waitUntil(t, 5*time.Minute, "both NVIDIADrivers are ready and every GPU node is routed", func(ctx context.Context) (bool, error) {
			for _, name := range []string{precompiledDriver, compiledDriver} {
				u, err := dyn.Resource(nvidiaDrivers).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if state, _, _ := unstructured.NestedString(u.Object, "status", "state"); state != "ready" {
					return false, nil
				}
			}
			nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			clear(owners)
			for _, n := range nodes.Items {
				if o := n.Labels["nvidia.com/gpu-operator.driver.owner"]; o != "" {
					owners[n.Name] = o
				}
			}
			return len(owners) == 3, nil
		})
		want := map[string]string{"gpu-worker-1": precompiledDriver, "gpu-worker-2": precompiledDriver, "gpu-worker-3": compiledDriver}
		if !maps.Equal(owners, want) {
			t.Errorf("the controller routed the nodes %v, want %v", owners, want)
		}
		// The driver DaemonSets: the precompiled one pulls the kernel's image, the other the
		// driver version built for the OS.
		dss, err := c.Kube.AppsV1().DaemonSets(plan.DefaultNamespace).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var images []string
		for _, ds := range dss.Items {
			if slices.ContainsFunc(ds.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "NVIDIADriver" }) {
				images = append(images, driverImage(ds))
			}
		}
		slices.Sort(images)
		wantImages := []string{repo + ":595-6.8.0-60-generic-ubuntu24.04", repo + ":595.91.07-ubuntu24.04"}
		if !slices.Equal(images, wantImages) {
			t.Errorf("the NVIDIADrivers' DaemonSets pull %v, want %v", images, wantImages)
		}
	})

	t.Run("status names each NVIDIADriver with its nodes", func(t *testing.T) {
		code, st := statusJSON(t, c, healthyWait()...)
		var check *engine.StatusCheck
		for i := range st.Checks {
			if st.Checks[i].Name == "nvidia-drivers" {
				check = &st.Checks[i]
			}
		}
		if code != 0 || check == nil || check.State != engine.CheckOK ||
			!strings.Contains(check.Message, "NVIDIADriver "+compiledDriver+": ready (gpu-worker-3)") ||
			!strings.Contains(check.Message, "NVIDIADriver "+precompiledDriver+": ready (gpu-worker-1, gpu-worker-2)") {
			t.Errorf("status exit %d, nvidia-drivers check %+v", code, check)
		}
	})

	t.Run("a second install changes nothing", func(t *testing.T) {
		assertRerunChangesNothing(t, c, nil, args...)
	})

	t.Run("upgrade asks the registry again: the kernel whose image appeared goes precompiled", func(t *testing.T) {
		if err := c.PushImage(context.Background(), "nvidia/driver", driverimage.PrecompiledTag("595", aws.Kernel, "ubuntu24.04")); err != nil {
			t.Fatal(err)
		}
		res := upgradeJSON(t, c, "--yes")
		if res.Install == nil || res.Install.Plan == nil || len(res.Install.Plan.Drivers) != 3 ||
			slices.ContainsFunc(res.Install.Plan.Drivers, func(d plan.NodeDriver) bool { return !d.Precompiled }) {
			t.Fatalf("the upgrade's plan: %+v; want every node precompiled (the recorded --precompiled auto, asked again)", res.Install)
		}
		awsDriver := "kernel-6.8.0-1017-aws"
		waitUntil(t, 5*time.Minute, "gpu-worker-3 is routed to "+awsDriver+", which is ready", func(ctx context.Context) (bool, error) {
			n, err := c.Kube.CoreV1().Nodes().Get(ctx, "gpu-worker-3", metav1.GetOptions{})
			if err != nil || n.Labels["nvidia.com/gpu-operator.driver.owner"] != awsDriver {
				return false, err
			}
			u, err := dynamicClient(t, c).Resource(nvidiaDrivers).Get(ctx, awsDriver, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			state, _, _ := unstructured.NestedString(u.Object, "status", "state")
			return state == "ready", nil
		})
	})

	t.Run("uninstall deletes the NVIDIADrivers", func(t *testing.T) {
		if code, _, stderr := uninstallJSON(t, c, "--yes"); code != 0 {
			t.Fatalf("uninstall exit %d: %s", code, stderr)
		}
		list, err := dynamicClient(t, c).Resource(nvidiaDrivers).List(t.Context(), metav1.ListOptions{})
		if err == nil && len(list.Items) > 0 {
			t.Errorf("%d NVIDIADrivers left after uninstall", len(list.Items))
		}
		// The controller's owner labels go with the stack.
		if after := nodesMetadata(t, c); !reflect.DeepEqual(nodesBefore, after) {
			t.Errorf("nodes before install:\n%v\nafter uninstall:\n%v", nodesBefore, after)
		}
	})
}

// driverImage is the image of a driver DaemonSet's nvidia-driver-ctr container.
func driverImage(ds appsv1.DaemonSet) string {
	for _, ctr := range ds.Spec.Template.Spec.Containers {
		if ctr.Name == "nvidia-driver-ctr" {
			return ctr.Image
		}
	}
	return ds.Name + ": no nvidia-driver-ctr"
}

// TestPrecompiledAutoBeforeTheDefaultDriver: GPU Operator v26.3.3 has no default NVIDIADriver, so
// --precompiled auto gives each kernel its own, precompiled where the registry has the image (the
// generic kernel) and compiled elsewhere (the AWS kernel); NVIDIA's real v26.3.3 controller reconciles
// both. A GPU node that joins later on a third kernel is selected by neither: status fails naming it.
func TestPrecompiledAutoBeforeTheDefaultDriver(t *testing.T) {
	t.Parallel()
	c, generic, _ := twoKernels(t, false)
	if err := c.PushImage(context.Background(), "nvidia/driver", driverimage.PrecompiledTag("580", generic.Kernel, "ubuntu24.04")); err != nil {
		t.Fatal(err)
	}
	res, _ := installJSON(t, c, "--operator-version", "v26.3.3", "--precompiled", "auto", "--registry", c.RegistryHost, "--set", "driver.version=580.126.20")
	if !slices.ContainsFunc(res.Plan.Warnings, func(w string) bool { return strings.Contains(w, "has no default NVIDIADriver") }) {
		t.Errorf("warnings %q: want the one about nodes that join later", res.Plan.Warnings)
	}
	assertRealController(t, c, "v26.3.3")
	dyn := dynamicClient(t, c)
	names := []string{"kernel-6.8.0-1017-aws", "kernel-6.8.0-60-generic"}
	waitUntil(t, 5*time.Minute, "both kernels' NVIDIADrivers are ready", func(ctx context.Context) (bool, error) {
		list, err := dyn.Resource(nvidiaDrivers).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var ready []string
		for _, d := range list.Items {
			if state, _, _ := unstructured.NestedString(d.Object, "status", "state"); state == "ready" {
				ready = append(ready, d.GetName())
			}
		}
		slices.Sort(ready)
		return slices.Equal(ready, names), nil
	})

	// A GPU node on a kernel no NVIDIADriver selects: a copy of gpu-worker-3 with a newer kernel, as
	// NFD labels it.
	const joined, kernel = "gpu-joined-1", "6.8.0-1020-aws"
	src, err := c.Kube.CoreV1().Nodes().Get(t.Context(), "gpu-worker-3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: joined, Labels: map[string]string{}, Annotations: maps.Clone(src.Annotations)}, Status: src.Status}
	for k, v := range src.Labels {
		if !strings.HasPrefix(k, "nvidia.com/") {
			n.Labels[k] = v
		}
	}
	n.Labels["kubernetes.io/hostname"] = joined
	n.Labels[plan.KernelLabel] = kernel
	n.Status.NodeInfo.KernelVersion = kernel
	if _, err := c.Kube.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{FieldManager: "kubelet"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 3*time.Minute, "status names the joined node as driven by no NVIDIADriver", func(ctx context.Context) (bool, error) {
		code, st := statusJSON(t, c)
		for _, ch := range st.Checks {
			if ch.Name == "nvidia-drivers" {
				return code == 4 && ch.State == engine.CheckFailed && strings.Contains(ch.Message, "no NVIDIADriver selects "+joined+" (kernel "+kernel+")"), nil
			}
		}
		return false, nil
	})
}
