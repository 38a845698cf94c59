package olm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/e2e/sandbox/operator"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
	nfdstandin "github.com/gpuctl/gpuctl/e2e/sandbox/standin/nfd"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin/standintest"
)

// OLM fixtures: the catalog as the OpenShift flavour serves it (NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst).
const (
	gpuOperatorNS  = "nvidia-gpu-operator"
	gpuOperatorCSV = "gpu-operator-certified.v26.7.0"
	marketplaceNS  = "openshift-marketplace"
	testAlmExample = `[{"apiVersion":"nvidia.com/v1","kind":"ClusterPolicy","metadata":{"name":"gpu-cluster-policy"},"spec":{"cdi":{"enabled":true}}}]`
)

func testPackage(name, catalog, defaultChannel string, channels ...map[string]any) *unstructured.Unstructured {
	var ch []any
	for _, c := range channels {
		ch = append(ch, c)
	}
	return standintest.Object("packages.operators.coreos.com/v1", "PackageManifest", marketplaceNS, name, map[string]any{"status": map[string]any{
		"packageName": name, "catalogSource": catalog, "catalogSourceNamespace": marketplaceNS,
		"defaultChannel": defaultChannel, "channels": ch,
	}})
}

func testChannel(name, csv, version string, annotations map[string]any) map[string]any {
	return map[string]any{"name": name, "currentCSV": csv, "currentCSVDesc": map[string]any{
		"displayName": "some operator", "version": version, "annotations": annotations,
	}}
}

func testSubscription(ns, name, pkg, catalog, approval string, extra map[string]any) *unstructured.Unstructured {
	spec := map[string]any{"name": pkg, "source": catalog, "sourceNamespace": marketplaceNS, "installPlanApproval": approval}
	for k, v := range extra {
		spec[k] = v
	}
	return standintest.Object(olmAPIVersion, olmKindSub, ns, name, map[string]any{"spec": spec})
}

func testOperatorGroup(ns string, targets ...any) *unstructured.Unstructured {
	return standintest.Object("operators.coreos.com/v1", olmKindGroup, ns, ns+"-group", map[string]any{"spec": map[string]any{"targetNamespaces": targets}})
}

// olmFixture is a typed and a dynamic fake client with the catalogs of an OpenShift cluster, and the
// OLM stand-in running against them.
func olmFixture(t *testing.T, objs ...runtime.Object) (*fake.Clientset, dynamic.Interface) {
	t.Helper()
	listKinds := map[schema.GroupVersionResource]string{SubscriptionsGVR: "SubscriptionList", olmInstallPlansGVR: "InstallPlanList", CSVsGVR: "ClusterServiceVersionList", olmCatalogSourcesGVR: "CatalogSourceList", OperatorGroupsGVR: "OperatorGroupList", PackageManifestsGVR: "PackageManifestList", nfdstandin.OpenShiftGVR: "NodeFeatureDiscoveryList"}
	base := []runtime.Object{
		standintest.Object(olmAPIVersion, "CatalogSource", marketplaceNS, "certified-operators", map[string]any{"spec": map[string]any{"sourceType": "grpc"}}),
		standintest.Object(olmAPIVersion, "CatalogSource", marketplaceNS, "redhat-operators", map[string]any{"spec": map[string]any{"sourceType": "grpc"}}),
		testPackage("gpu-operator-certified", "certified-operators", "v26.7",
			testChannel("stable", gpuOperatorCSV, "26.7.0", map[string]any{"alm-examples": testAlmExample}),
			testChannel("v26.7", gpuOperatorCSV, "26.7.0", map[string]any{"alm-examples": testAlmExample})),
		testPackage("nfd", "redhat-operators", "stable", testChannel("stable", "nfd.4.19.0-202601051012", "4.19.0-202601051012", map[string]any{})),
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, append(base, objs...)...)
	cs := fake.NewClientset()
	standintest.Start(t, func(ctx context.Context, logf func(string, ...any)) error {
		return Run(ctx, cs, dyn, nil, logf)
	})
	return cs, dyn
}

func getTestObject(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	return dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// statusCondition returns the condition of type typ in obj's status.conditions, or nil.
func statusCondition(obj *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// onlyPlan returns the one InstallPlan in ns.
func onlyPlan(ctx context.Context, dyn dynamic.Interface, ns string) (*unstructured.Unstructured, string, error) {
	list, err := dyn.Resource(olmInstallPlansGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, "", err
	}
	if len(list.Items) != 1 {
		return nil, fmt.Sprintf("%d InstallPlans", len(list.Items)), nil
	}
	return &list.Items[0], "", nil
}

func setDeploymentAvailable(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// As the deployment controller reports a finished rollout: it has seen the spec, every replica is
	// updated, ready and available.
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}
	if _, err := cs.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// expectGPUOperatorInstalled checks what installing the CSV must produce: the CSV with the catalog's
// alm-examples, and the operator Deployment that the sandbox's operator follower recognises.
func expectGPUOperatorInstalled(t *testing.T, cs kubernetes.Interface, dyn dynamic.Interface) {
	t.Helper()
	standintest.EventuallyOK(t, "the CSV is created with alm-examples", func(ctx context.Context) (string, error) {
		csv, err := getTestObject(ctx, dyn, CSVsGVR, gpuOperatorNS, gpuOperatorCSV)
		if err != nil {
			return "", err
		}
		if got := csv.GetAnnotations()["alm-examples"]; got != testAlmExample {
			return "alm-examples = " + got, nil
		}
		if got := standin.Field(csv.Object, "spec", "version"); got != "26.7.0" {
			return "spec.version = " + got, nil
		}
		return "", nil
	})
	standintest.EventuallyOK(t, "the operator Deployment, its service account and RBAC exist", func(ctx context.Context) (string, error) {
		d, err := cs.AppsV1().Deployments(gpuOperatorNS).Get(ctx, "gpu-operator", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		pod := d.Spec.Template.Spec
		switch {
		case !operator.IsGPUOperatorDeployment(d):
			return "the operator follower would not recognise the Deployment", nil
		case d.Spec.Template.Labels["app"] != "gpu-operator":
			return fmt.Sprintf("pod labels %v", d.Spec.Template.Labels), nil
		case pod.ServiceAccountName != "gpu-operator":
			return "service account " + pod.ServiceAccountName, nil
		case pod.Containers[0].Image != "nvcr.io/nvidia/gpu-operator:v26.7.0":
			return "image " + pod.Containers[0].Image, nil
		case len(d.OwnerReferences) != 1 || d.OwnerReferences[0].Kind != olmKindCSV || d.OwnerReferences[0].Name != gpuOperatorCSV:
			return fmt.Sprintf("owner references %v", d.OwnerReferences), nil
		case !slices.ContainsFunc(pod.Tolerations, func(t corev1.Toleration) bool { return t.Operator == corev1.TolerationOpExists && t.Key == "" }):
			return fmt.Sprintf("tolerations %v", pod.Tolerations), nil
		}
		if _, err := cs.CoreV1().ServiceAccounts(gpuOperatorNS).Get(ctx, "gpu-operator", metav1.GetOptions{}); err != nil {
			return "", err
		}
		crb, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, gpuOperatorCSV+"-gpu-operator", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if crb.Subjects[0].Name != "gpu-operator" || crb.Subjects[0].Namespace != gpuOperatorNS {
			return fmt.Sprintf("binding subjects %v", crb.Subjects), nil
		}
		_, err = cs.RbacV1().ClusterRoles().Get(ctx, gpuOperatorCSV+"-gpu-operator", metav1.GetOptions{})
		return "", err
	})
}

func TestOLMStandInInstallsAnAutomaticSubscription(t *testing.T) {
	cs, dyn := olmFixture(t,
		testOperatorGroup(gpuOperatorNS, gpuOperatorNS),
		testSubscription(gpuOperatorNS, "gpu-operator-certified", "gpu-operator-certified", "certified-operators", "Automatic", map[string]any{"channel": "v26.7"}))
	ctx := context.Background()

	standintest.EventuallyOK(t, "the InstallPlan completes", func(ctx context.Context) (string, error) {
		plan, p, err := onlyPlan(ctx, dyn, gpuOperatorNS)
		if p != "" || err != nil {
			return p, err
		}
		names, _, _ := unstructured.NestedStringSlice(plan.Object, "spec", "clusterServiceVersionNames")
		approved, _, _ := unstructured.NestedBool(plan.Object, "spec", "approved")
		if phase := standin.Field(plan.Object, "status", "phase"); phase != "Complete" || !approved || !slices.Equal(names, []string{gpuOperatorCSV}) || !strings.HasPrefix(plan.GetName(), "install-") {
			return fmt.Sprintf("plan %s phase %q approved %v csvs %v", plan.GetName(), phase, approved, names), nil
		}
		return "", nil
	})
	expectGPUOperatorInstalled(t, cs, dyn)
	standintest.EventuallyOK(t, "the CSV waits for its Deployment", func(ctx context.Context) (string, error) {
		csv, err := getTestObject(ctx, dyn, CSVsGVR, gpuOperatorNS, gpuOperatorCSV)
		if err != nil {
			return "", err
		}
		if phase := standin.Field(csv.Object, "status", "phase"); phase != "Installing" {
			return "phase " + phase, nil
		}
		if csv.GetAnnotations()["olm.targetNamespaces"] != gpuOperatorNS {
			return fmt.Sprintf("annotations %v", csv.GetAnnotations()), nil
		}
		return "", nil
	})

	setDeploymentAvailable(t, cs, gpuOperatorNS, "gpu-operator")
	standintest.EventuallyOK(t, "the CSV succeeds", func(ctx context.Context) (string, error) {
		csv, err := getTestObject(ctx, dyn, CSVsGVR, gpuOperatorNS, gpuOperatorCSV)
		if err != nil {
			return "", err
		}
		if phase, reason := standin.Field(csv.Object, "status", "phase"), standin.Field(csv.Object, "status", "reason"); phase != "Succeeded" || reason != "InstallSucceeded" {
			return fmt.Sprintf("phase %s reason %s", phase, reason), nil
		}
		return "", nil
	})
	standintest.EventuallyOK(t, "the Subscription is at the latest known CSV", func(ctx context.Context) (string, error) {
		sub, err := getTestObject(ctx, dyn, SubscriptionsGVR, gpuOperatorNS, "gpu-operator-certified")
		if err != nil {
			return "", err
		}
		plan, _, _ := onlyPlan(ctx, dyn, gpuOperatorNS)
		st := sub.Object
		switch {
		case standin.Field(st, "status", "state") != "AtLatestKnown":
			return "state " + standin.Field(st, "status", "state"), nil
		case standin.Field(st, "status", "installedCSV") != gpuOperatorCSV || standin.Field(st, "status", "currentCSV") != gpuOperatorCSV:
			return fmt.Sprintf("installedCSV %q currentCSV %q", standin.Field(st, "status", "installedCSV"), standin.Field(st, "status", "currentCSV")), nil
		case plan == nil || standin.Field(st, "status", "installPlanRef", "name") != plan.GetName():
			return "installPlanRef " + standin.Field(st, "status", "installPlanRef", "name"), nil
		case statusCondition(sub, "CatalogSourcesUnhealthy")["status"] != "False":
			return fmt.Sprintf("CatalogSourcesUnhealthy %v", statusCondition(sub, "CatalogSourcesUnhealthy")), nil
		case statusCondition(sub, "InstallPlanPending") != nil:
			return "InstallPlanPending still set", nil
		}
		return "", nil
	})
	standintest.EventuallyOK(t, "the OperatorGroup reports its namespaces", func(ctx context.Context) (string, error) {
		og, err := getTestObject(ctx, dyn, OperatorGroupsGVR, gpuOperatorNS, gpuOperatorNS+"-group")
		if err != nil {
			return "", err
		}
		if ns, _, _ := unstructured.NestedStringSlice(og.Object, "status", "namespaces"); !slices.Equal(ns, []string{gpuOperatorNS}) {
			return fmt.Sprintf("status.namespaces %v", ns), nil
		}
		return "", nil
	})

	// Deleting the CSV while the Subscription exists makes OLM install it again, through a new plan.
	if err := dyn.Resource(CSVsGVR).Namespace(gpuOperatorNS).Delete(ctx, gpuOperatorCSV, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	standintest.EventuallyOK(t, "a second InstallPlan reinstalls the CSV", func(ctx context.Context) (string, error) {
		plans, err := dyn.Resource(olmInstallPlansGVR).Namespace(gpuOperatorNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		if len(plans.Items) != 2 {
			return fmt.Sprintf("%d InstallPlans", len(plans.Items)), nil
		}
		csv, err := getTestObject(ctx, dyn, CSVsGVR, gpuOperatorNS, gpuOperatorCSV)
		if err != nil {
			return "", err
		}
		if phase := standin.Field(csv.Object, "status", "phase"); phase != "Succeeded" {
			return "phase " + phase, nil
		}
		return "", nil
	})

	// Deleting the Subscription leaves the operator installed, as in OLM.
	if err := dyn.Resource(SubscriptionsGVR).Namespace(gpuOperatorNS).Delete(ctx, "gpu-operator-certified", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	standintest.ConsistentlyOK(t, "the CSV outlives its Subscription", 300*time.Millisecond, func(ctx context.Context) (string, error) {
		_, err := getTestObject(ctx, dyn, CSVsGVR, gpuOperatorNS, gpuOperatorCSV)
		return "", err
	})
	// Deleting the CSV removes its cluster-scoped RBAC (the garbage collector, absent from fakes,
	// takes the namespaced objects).
	if err := dyn.Resource(CSVsGVR).Namespace(gpuOperatorNS).Delete(ctx, gpuOperatorCSV, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	standintest.EventuallyOK(t, "the CSV's ClusterRole and binding are deleted", func(ctx context.Context) (string, error) {
		if _, err := cs.RbacV1().ClusterRoles().Get(ctx, gpuOperatorCSV+"-gpu-operator", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("cluster role: %v", err), nil
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, gpuOperatorCSV+"-gpu-operator", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("cluster role binding: %v", err), nil
		}
		return "", nil
	})
}

func TestOLMStandInWaitsForManualApproval(t *testing.T) {
	cs, dyn := olmFixture(t,
		testOperatorGroup(gpuOperatorNS, gpuOperatorNS),
		testSubscription(gpuOperatorNS, "gpu-operator-certified", "gpu-operator-certified", "certified-operators", "Manual",
			map[string]any{"channel": "v26.7", "startingCSV": gpuOperatorCSV}))
	ctx := context.Background()

	var planName string
	standintest.EventuallyOK(t, "the InstallPlan requires approval", func(ctx context.Context) (string, error) {
		plan, p, err := onlyPlan(ctx, dyn, gpuOperatorNS)
		if p != "" || err != nil {
			return p, err
		}
		approved, _, _ := unstructured.NestedBool(plan.Object, "spec", "approved")
		if phase := standin.Field(plan.Object, "status", "phase"); phase != "RequiresApproval" || approved || standin.Field(plan.Object, "spec", "approval") != "Manual" {
			return fmt.Sprintf("phase %q approved %v", phase, approved), nil
		}
		planName = plan.GetName()
		return "", nil
	})
	standintest.EventuallyOK(t, "the Subscription shows the pending plan", func(ctx context.Context) (string, error) {
		sub, err := getTestObject(ctx, dyn, SubscriptionsGVR, gpuOperatorNS, "gpu-operator-certified")
		if err != nil {
			return "", err
		}
		c := statusCondition(sub, "InstallPlanPending")
		if standin.Field(sub.Object, "status", "state") != "UpgradePending" || c == nil || c["reason"] != "RequiresApproval" || standin.Field(sub.Object, "status", "installPlanRef", "name") != planName {
			return fmt.Sprintf("status %v", sub.Object["status"]), nil
		}
		return "", nil
	})
	standintest.ConsistentlyOK(t, "nothing is installed before approval", 300*time.Millisecond, func(ctx context.Context) (string, error) {
		if _, err := getTestObject(ctx, dyn, CSVsGVR, gpuOperatorNS, gpuOperatorCSV); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("CSV: %v", err), nil
		}
		return "", nil
	})

	// What `oc patch installplan … --type merge -p '{"spec":{"approved":true}}'` does (NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst).
	if _, err := dyn.Resource(olmInstallPlansGVR).Namespace(gpuOperatorNS).Patch(ctx, planName, types.MergePatchType,
		[]byte(`{"spec":{"approved":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	expectGPUOperatorInstalled(t, cs, dyn)
	standintest.EventuallyOK(t, "the approved plan completes", func(ctx context.Context) (string, error) {
		plan, err := getTestObject(ctx, dyn, olmInstallPlansGVR, gpuOperatorNS, planName)
		if err != nil {
			return "", err
		}
		if phase := standin.Field(plan.Object, "status", "phase"); phase != "Complete" {
			return "phase " + phase, nil
		}
		return "", nil
	})
}

func TestOLMStandInNeedsAnOperatorGroup(t *testing.T) {
	cs, dyn := olmFixture(t,
		testSubscription(gpuOperatorNS, "gpu-operator-certified", "gpu-operator-certified", "certified-operators", "Automatic", nil))
	standintest.EventuallyOK(t, "the InstallPlan fails its install check", func(ctx context.Context) (string, error) {
		plan, p, err := onlyPlan(ctx, dyn, gpuOperatorNS)
		if p != "" || err != nil {
			return p, err
		}
		c := statusCondition(plan, "Installed")
		if standin.Field(plan.Object, "status", "phase") != "Installing" || c == nil || c["status"] != "False" || c["reason"] != olmInstallCheckErr || c["message"] != olmNoGroupMessage {
			return fmt.Sprintf("status %v", plan.Object["status"]), nil
		}
		return "", nil
	})
	standintest.ConsistentlyOK(t, "nothing is installed without an OperatorGroup", 200*time.Millisecond, func(ctx context.Context) (string, error) {
		if _, err := getTestObject(ctx, dyn, CSVsGVR, gpuOperatorNS, gpuOperatorCSV); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("CSV: %v", err), nil
		}
		return "", nil
	})
	standintest.CreateUnstructured(t, dyn, OperatorGroupsGVR, testOperatorGroup(gpuOperatorNS, gpuOperatorNS))
	expectGPUOperatorInstalled(t, cs, dyn)
}

func TestOLMStandInReportsResolutionFailures(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		sub                        *unstructured.Unstructured
		catalogUnhealthy, contains string
	}{
		{
			name:             "a package missing from the catalog",
			sub:              testSubscription(gpuOperatorNS, "s", "no-such-operator", "certified-operators", "Automatic", nil),
			catalogUnhealthy: "False",
			contains:         "no operators found in package no-such-operator",
		},
		{
			name:             "a catalog that does not exist",
			sub:              testSubscription(gpuOperatorNS, "s", "gpu-operator-certified", "missing-catalog", "Automatic", nil),
			catalogUnhealthy: "True",
			contains:         "no operators found from catalog missing-catalog",
		},
		{
			name:             "a channel the package does not have",
			sub:              testSubscription(gpuOperatorNS, "s", "gpu-operator-certified", "certified-operators", "Automatic", map[string]any{"channel": "v99.1"}),
			catalogUnhealthy: "False",
			contains:         "no operators found in channel v99.1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, dyn := olmFixture(t, testOperatorGroup(gpuOperatorNS, gpuOperatorNS), tc.sub)
			standintest.EventuallyOK(t, "the Subscription reports the failure", func(ctx context.Context) (string, error) {
				sub, err := getTestObject(ctx, dyn, SubscriptionsGVR, gpuOperatorNS, "s")
				if err != nil {
					return "", err
				}
				rf, cu := statusCondition(sub, "ResolutionFailed"), statusCondition(sub, "CatalogSourcesUnhealthy")
				if rf == nil || cu == nil || rf["status"] != "True" || rf["reason"] != "ConstraintsNotSatisfiable" ||
					!strings.Contains(fmt.Sprint(rf["message"]), tc.contains) || cu["status"] != tc.catalogUnhealthy {
					return fmt.Sprintf("conditions %v", sub.Object["status"]), nil
				}
				return "", nil
			})
			if _, p, _ := onlyPlan(context.Background(), dyn, gpuOperatorNS); p != "0 InstallPlans" {
				t.Errorf("want no InstallPlan, got %s", p)
			}
		})
	}
}

func TestOLMStandInDeploysNFDForANodeFeatureDiscovery(t *testing.T) {
	const nfdNS = "openshift-nfd"
	const operandImage = "registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:v4.19"
	const conf = "sources:\n  pci:\n    deviceLabelFields: [\"vendor\"]\n"
	cs, dyn := olmFixture(t,
		testOperatorGroup(nfdNS, nfdNS),
		testSubscription(nfdNS, "nfd", "nfd", "redhat-operators", "Automatic", map[string]any{"channel": "stable"}))
	// What the operator OLM installs then does is the NFD stand-in's part (nfd.RunOperator).
	standintest.Start(t, func(ctx context.Context, logf func(string, ...any)) error {
		return nfdstandin.RunOperator(ctx, cs, dyn, logf)
	})
	ctx := context.Background()
	nfd := standintest.Object("nfd.openshift.io/v1", "NodeFeatureDiscovery", nfdNS, "nfd-instance", map[string]any{"spec": map[string]any{
		"operand":      map[string]any{"image": operandImage},
		"workerConfig": map[string]any{"configData": conf},
	}})
	standintest.CreateUnstructured(t, dyn, nfdstandin.OpenShiftGVR, nfd)
	standintest.EventuallyOK(t, "the NFD operator is deployed", func(ctx context.Context) (string, error) {
		_, err := cs.AppsV1().Deployments(nfdNS).Get(ctx, nfdOperatorDeployment, metav1.GetOptions{})
		return "", err
	})
	standintest.ConsistentlyOK(t, "no operands before the operator's CSV has succeeded", 200*time.Millisecond, func(ctx context.Context) (string, error) {
		if _, err := cs.AppsV1().DaemonSets(nfdNS).Get(ctx, "nfd-worker", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("nfd-worker: %v", err), nil
		}
		return "", nil
	})
	setDeploymentAvailable(t, cs, nfdNS, nfdOperatorDeployment)

	var ds *appsv1.DaemonSet
	standintest.EventuallyOK(t, "nfd-worker, nfd-master and the worker config exist, owned by the CR", func(ctx context.Context) (string, error) {
		var err error
		if ds, err = cs.AppsV1().DaemonSets(nfdNS).Get(ctx, "nfd-worker", metav1.GetOptions{}); err != nil {
			return "", err
		}
		spec := ds.Spec.Template.Spec
		switch {
		case !standin.PodSpecRuns(&spec, "nfd-worker"):
			return "the worker does not run nfd-worker", nil
		case spec.Containers[0].Image != operandImage:
			return "image " + spec.Containers[0].Image, nil
		case len(spec.Volumes) != 1 || spec.Volumes[0].ConfigMap == nil || spec.Volumes[0].ConfigMap.Name != "nfd-worker":
			return fmt.Sprintf("volumes %v", spec.Volumes), nil
		case len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists || spec.Tolerations[0].Key != "":
			return fmt.Sprintf("tolerations %v", spec.Tolerations), nil
		case len(ds.OwnerReferences) != 1 || ds.OwnerReferences[0].Kind != "NodeFeatureDiscovery" || ds.OwnerReferences[0].Name != "nfd-instance":
			return fmt.Sprintf("owner references %v", ds.OwnerReferences), nil
		}
		master, err := cs.AppsV1().Deployments(nfdNS).Get(ctx, "nfd-master", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if !standin.PodSpecRuns(&master.Spec.Template.Spec, "nfd-master") || len(master.OwnerReferences) != 1 {
			return "nfd-master does not run nfd-master or is not owned", nil
		}
		cm, err := cs.CoreV1().ConfigMaps(nfdNS).Get(ctx, "nfd-worker", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if cm.Data["nfd-worker.conf"] != conf {
			return fmt.Sprintf("config %q", cm.Data["nfd-worker.conf"]), nil
		}
		return "", nil
	})

	// The DaemonSet controller and kwok would now run the pods; the NFD stand-in labels the node from
	// them with the CR's deviceLabelFields.
	standintest.CreateTyped(t, cs.CoreV1().Nodes().Create, standintest.Node("gpu-0", "5.15.0-1045-aws", nil))
	worker := standintest.Pod(nfdNS, "nfd-worker-8xq4z", "gpu-0", true, ds.Spec.Template.Spec.Containers...)
	worker.Spec.Volumes = ds.Spec.Template.Spec.Volumes
	standintest.CreateTyped(t, cs.CoreV1().Pods(nfdNS).Create, worker)
	standintest.CreateTyped(t, cs.CoreV1().Pods(nfdNS).Create, standintest.Pod(nfdNS, "nfd-master-6f9c8", "cp-0", true, corev1.Container{Name: "nfd-master", Image: operandImage, Command: []string{"nfd-master"}}))
	standintest.Start(t, func(ctx context.Context, logf func(string, ...any)) error {
		return nfdstandin.Run(ctx, cs, map[string]standin.Hardware{"gpu-0": {GPUs: 1, GPUPCIClass: "0302", GPUProduct: "NVIDIA-A100-SXM4-40GB", OSReleaseID: "ubuntu", OSVersionID: "22.04"}}, logf)
	})
	standintest.EventuallyOK(t, "the node gets pci-10de.present", func(ctx context.Context) (string, error) {
		n, err := standintest.GetNode(ctx, cs, "gpu-0")
		if err != nil {
			return "", err
		}
		if n.Labels[nfdstandin.FeatureLabelNs+"/pci-10de.present"] != "true" || n.Labels[nfdstandin.FeatureLabelNs+"/pci-0302_10de.present"] != "" {
			return fmt.Sprintf("labels %v", n.Labels), nil
		}
		return "", nil
	})

	ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 1, CurrentNumberScheduled: 1, NumberReady: 1, NumberAvailable: 1}
	if _, err := cs.AppsV1().DaemonSets(nfdNS).UpdateStatus(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	setDeploymentAvailable(t, cs, nfdNS, "nfd-master")
	standintest.EventuallyOK(t, "the NodeFeatureDiscovery is Available", func(ctx context.Context) (string, error) {
		cr, err := getTestObject(ctx, dyn, nfdstandin.OpenShiftGVR, nfdNS, "nfd-instance")
		if err != nil {
			return "", err
		}
		if c := statusCondition(cr, "Available"); c == nil || c["status"] != "True" {
			return fmt.Sprintf("Available %v", c), nil
		}
		return "", nil
	})
}
