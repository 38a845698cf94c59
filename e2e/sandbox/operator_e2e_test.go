package sandbox

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/gpuctl/gpuctl/e2e/sandbox/operator"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/olm"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/standintest"
)

// On the openshift flavour, an OLM install of the default channel of a catalog whose default is
// v26.3.3 gets v26.3.3's bundle: its CRDs (no gpuclusters.nvidia.com, which only v26.7.0 has), an
// operator Deployment with the v26.3.3 image, and so the v26.3.3 controller, which reconciles the
// CSV's example ClusterPolicy.
func TestOLMInstallRunsTheControllerOfTheCSVsRelease(t *testing.T) {
	const release = "v26.3.3"
	c := StartT(t, Options{Scenario: Scenario{Distro: "openshift", GPUNodes: 1, CPUNodes: 0, NFDLabels: true}, OperatorVersion: release})
	ctx := t.Context()
	dyn := dynamic.NewForConfigOrDie(c.Config)
	want, _, err := c.Tools.Operator(release)
	if err != nil {
		t.Fatal(err)
	}

	pm, err := dyn.Resource(olm.PackageManifestsGVR).Namespace(marketplaceNS).Get(ctx, "gpu-operator-certified", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	channel, _, _ := unstructured.NestedString(pm.Object, "status", "defaultChannel")
	if channel != "v26.3" {
		t.Fatalf("default channel %q, want v26.3", channel)
	}
	const ns = "nvidia-gpu-operator"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for gvr, obj := range map[schema.GroupVersionResource]*unstructured.Unstructured{olm.OperatorGroupsGVR: testOperatorGroup(ns, ns), olm.SubscriptionsGVR: testSubscription(ns, "gpu-operator-certified", "gpu-operator-certified", "certified-operators", "Automatic", map[string]any{"channel": channel})} {
		if _, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	subscribed := time.Now()

	t.Run("the follower runs the controller of the CSV's release", func(t *testing.T) {
		var runs []OperatorRun
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			runs = c.OperatorRuns()
			return len(runs) > 0, nil
		})
		if err != nil {
			t.Fatalf("no controller ran: %v", err)
		}
		if runs[0].Release != want.Release || runs[0].FromSources != want.FromSources || runs[0].Namespace != ns {
			t.Errorf("OperatorRuns()[0] = %+v, want release %s (from sources: %v) in %s", runs[0], want.Release, want.FromSources, ns)
		}
		d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "gpu-operator", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if img := operator.Container(d).Image; img != "nvcr.io/nvidia/gpu-operator:"+release {
			t.Errorf("CSV's operator image %s", img)
		}
	})

	t.Run("the bundle's CRDs are the release's", func(t *testing.T) {
		crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
		for name, present := range map[string]bool{"clusterpolicies.nvidia.com": true, "nvidiadrivers.nvidia.com": true, "gpuclusters.nvidia.com": false} {
			_, err := dyn.Resource(crds).Get(ctx, name, metav1.GetOptions{})
			if present && err != nil || !present && !apierrors.IsNotFound(err) {
				t.Errorf("CRD %s: present %v, want %v (%v)", name, err == nil, present, err)
			}
		}
	})

	t.Run("the CSV's example ClusterPolicy becomes ready with condition Ready/Reconciled", func(t *testing.T) {
		csv, err := dyn.Resource(olm.CSVsGVR).Namespace(ns).Get(ctx, "gpu-operator-certified.v"+strings.TrimPrefix(release, "v"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var examples []map[string]any
		if err := json.Unmarshal([]byte(csv.GetAnnotations()["alm-examples"]), &examples); err != nil {
			t.Fatal(err)
		}
		for _, ex := range examples {
			if ex["kind"] != "ClusterPolicy" {
				continue
			}
			if _, err := dyn.Resource(clusterPolicyGVR).Create(ctx, &unstructured.Unstructured{Object: ex}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			name, _ := ex["metadata"].(map[string]any)["name"].(string)
			waitClusterPolicyReady(t, ctx, dyn, name, 4*time.Minute)
			t.Logf("%s on openshift: Reconciled %s after the Subscription was created", release, time.Since(subscribed).Round(100*time.Millisecond))
			return
		}
		t.Fatal("the CSV has no example ClusterPolicy")
	})

	t.Run("the controller never exited", func(t *testing.T) {
		for _, r := range c.OperatorRuns() {
			if r.ExitErr != "" || !r.Exited.IsZero() {
				t.Errorf("run %+v", r)
			}
		}
	})
}

// The OpenShift flavour's catalog namespace, and the OLM objects a user creates to install from it.
const marketplaceNS = "openshift-marketplace"

func testOperatorGroup(ns string, targets ...any) *unstructured.Unstructured {
	return standintest.Object("operators.coreos.com/v1", "OperatorGroup", ns, ns+"-group", map[string]any{"spec": map[string]any{"targetNamespaces": targets}})
}

func testSubscription(ns, name, pkg, catalog, approval string, extra map[string]any) *unstructured.Unstructured {
	spec := map[string]any{"name": pkg, "source": catalog, "sourceNamespace": marketplaceNS, "installPlanApproval": approval}
	for k, v := range extra {
		spec[k] = v
	}
	return standintest.Object("operators.coreos.com/v1alpha1", "Subscription", ns, name, map[string]any{"spec": spec})
}
