package uninstall

import (
	"context"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/internal/kube"
)

func TestInstalledCSVs(t *testing.T) {
	sub := func(ns, name, csv string) runtime.Object {
		status := map[string]any{}
		if csv != "" {
			status["installedCSV"] = csv
		}
		return olmObject(kube.SubscriptionsGVR, "Subscription", ns, name, "", status)
	}
	for _, tc := range []struct {
		name string
		subs []runtime.Object
		want []string
	}{
		{"no Subscription, no CSV", nil, nil},
		{"the CSV each Subscription installed", []runtime.Object{sub("nvidia-gpu-operator", "gpu-operator-certified", "gpu-operator-certified.v26.7.0")},
			[]string{"gpu-operator-certified.v26.7.0"}},
		{"a Subscription OLM has not resolved yet has none", []runtime.Object{sub("nvidia-gpu-operator", "gpu-operator-certified", "")}, nil},
		{"a Subscription in another namespace is not the release's", []runtime.Object{sub("openshift-nfd", "nfd", "nfd.4.18.0")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := installedCSVs(context.Background(), olmDynamicClient(tc.subs...), "nvidia-gpu-operator"); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("CSVs %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDeleteCSV(t *testing.T) {
	const ns, csv = "nvidia-gpu-operator", "gpu-operator-certified.v26.7.0"
	csvObj := olmObject(kube.CSVsGVR, "ClusterServiceVersion", ns, csv, "csv-uid", nil)
	deployment := func(name string, owner types.UID) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		if owner != "" {
			d.OwnerReferences = []metav1.OwnerReference{{APIVersion: kube.CSVsGVR.GroupVersion().String(), Kind: "ClusterServiceVersion", Name: csv, UID: owner}}
		}
		return d
	}
	deploymentObj := func(name string) runtime.Object {
		return olmObject(schema.GroupVersionResource{Group: "apps", Version: "v1"}, "Deployment", ns, name, "", nil)
	}
	for _, tc := range []struct {
		name        string
		deployments []runtime.Object // as the typed client lists them
		left        []runtime.Object // still there when the wait looks
		wantErr     string
	}{
		{"the CSV goes, and the Deployment it owned has gone", []runtime.Object{deployment("gpu-operator", "csv-uid")}, nil, ""},
		{"a Deployment the CSV owned that is still there is waited for",
			[]runtime.Object{deployment("gpu-operator", "csv-uid")}, []runtime.Object{deploymentObj("gpu-operator")}, "Deployment nvidia-gpu-operator/gpu-operator is still there"},
		{"a Deployment the CSV did not own is not waited for",
			[]runtime.Object{deployment("other", "other-uid"), deployment("plain", "")}, []runtime.Object{deploymentObj("other"), deploymentObj("plain")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := olmDynamicClient(append([]runtime.Object{csvObj.DeepCopy()}, tc.left...)...)
			e := newExecution(&Executor{Clients: &kube.Clients{Dynamic: dyn, Kube: fake.NewClientset(tc.deployments...)}, FinalizerWait: 1}, &Plan{})
			_, err := e.deleteCSV(context.Background(), ns, csv)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err %v, want one saying %q", err, tc.wantErr)
			}
			if _, err := dyn.Resource(kube.CSVsGVR).Namespace(ns).Get(context.Background(), csv, metav1.GetOptions{}); err == nil {
				t.Errorf("ClusterServiceVersion %s is still there", csv)
			}
		})
	}
}
