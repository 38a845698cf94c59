package uninstall

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/record"
)

func TestReleaseFoundNamespaces(t *testing.T) {
	namespace := func(name string, managers ...metav1.ManagedFieldsEntry) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: managers}}
	}
	entry := func(manager string, op metav1.ManagedFieldsOperationType) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "v1", FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:pod-security.kubernetes.io/enforce":{}}}}`)}}
	}
	applied := entry(kube.FieldManager, metav1.ManagedFieldsOperationApply)
	updated := entry(kube.FieldManager, metav1.ManagedFieldsOperationUpdate)
	others := entry("kubectl-client-side-apply", metav1.ManagedFieldsOperationApply)
	for _, tc := range []struct {
		name     string
		recorded record.Object
		cluster  *corev1.Namespace
		want     []string
	}{
		{"a found namespace gpuctl applied is released", record.Object{Name: "gpu-operator"}, namespace("gpu-operator", others, applied), []string{"gpu-operator"}},
		{"a found namespace gpuctl never applied is left alone", record.Object{Name: "gpu-operator"}, namespace("gpu-operator", others), nil},
		{"gpuctl's updates (not applies) leave nothing to release", record.Object{Name: "gpu-operator"}, namespace("gpu-operator", updated), nil},
		{"a namespace gpuctl created is not released (purge deletes it)", record.Object{Name: "gpu-operator", Created: true}, namespace("gpu-operator", applied), nil},
		{"a found namespace that is gone is skipped", record.Object{Name: "gpu-operator"}, namespace("elsewhere", applied), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := fake.NewClientset(tc.cluster)
			e := newExecution(&Executor{Clients: &kube.Clients{Kube: kc}}, &Plan{record: &record.Record{Namespaces: []record.Object{tc.recorded}}})
			got, err := e.releaseFoundNamespaces(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("released %v, want %v", got, tc.want)
			}
			var applies []string
			for _, a := range kc.Actions() {
				if p, ok := a.(k8stesting.PatchAction); ok && p.GetPatchType() == types.ApplyPatchType {
					applies = append(applies, p.GetName())
				}
			}
			if !reflect.DeepEqual(applies, tc.want) {
				t.Errorf("applied %v, want %v", applies, tc.want)
			}
		})
	}
}

// The run looks again just before it deletes a namespace: one that holds something new is kept,
// with a warning, and the record keeps it for a later purge. Every delete carries the planned UID.
func TestPurgeLooksAgainBeforeItDeletesANamespace(t *testing.T) {
	for _, foreign := range []bool{false, true} {
		t.Run(fmt.Sprintf("something new in it: %v", foreign), func(t *testing.T) {
			clients, dyn := purgeCluster()
			// The plan as Read and Build make it of this cluster.
			s := &Snapshot{Record: purgeRecord(), Namespace: "gpu-operator", Releases: []InstalledRelease{{Name: "gpu-operator", Namespace: "gpu-operator"}}}
			var err error
			if s.Purge, err = (&reader{clients: clients}).purge(t.Context(), s); err != nil {
				t.Fatal(err)
			}
			p, err := Build(s, Options{Purge: true})
			if err != nil || len(p.Purge.deletions(stepPurgeNamespaces)) != 1 {
				t.Fatalf("plan %+v: %v; want the namespace deleted", p.Purge, err)
			}
			// The release's objects go before the namespace step: their owners are gone by then.
			for _, gvr := range []schema.GroupVersionResource{{Group: "apps", Version: "v1", Resource: "deployments"}, {Group: "apps", Version: "v1", Resource: "replicasets"}} {
				for _, name := range []string{"gpu-operator", "gpu-operator-6c9f"} {
					_ = dyn.Resource(gvr).Namespace("gpu-operator").Delete(t.Context(), name, metav1.DeleteOptions{})
				}
			}
			if foreign {
				if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("gpu-operator").
					Create(t.Context(), nsItem("v1", "ConfigMap", "team-notes", "notes-1", nil), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(t.Context(),
				&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "gpu-operator", "uid": "ns-1"}}},
				metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var warnings []string
			sink := event.SinkFunc(func(ev event.Event) {
				if ev.Type == event.Warning {
					warnings = append(warnings, ev.Message)
				}
			})
			e := newExecution(&Executor{Clients: clients, FinalizerWait: time.Millisecond, Sink: sink}, p)
			dyn.ClearActions()
			out, err := e.purgeNamespaces(t.Context(), func(string) {})
			if err != nil {
				t.Fatal(err)
			}
			var deletes []string
			for _, a := range dyn.Actions() {
				if d, ok := a.(k8stesting.DeleteAction); ok {
					deletes = append(deletes, d.GetResource().Resource+"/"+d.GetName())
					if pre := d.GetDeleteOptions().Preconditions; pre == nil || pre.UID == nil || *pre.UID != "ns-1" {
						t.Errorf("delete %s/%s without the planned UID as precondition: %+v", d.GetResource().Resource, d.GetName(), pre)
					}
				}
			}
			if foreign {
				if len(deletes) > 0 || !reflect.DeepEqual(e.keptNamespaces, []KeptNamespace{{Name: "gpu-operator", Holds: []string{"ConfigMap team-notes"}}}) || len(warnings) != 1 ||
					!strings.Contains(warnings[0], "namespace gpu-operator: it holds ConfigMap team-notes, which gpuctl did not create") ||
					!strings.Contains(out.Message, "kept namespace gpu-operator") {
					t.Errorf("deleted %v, kept %v, warned %q, said %q: want the namespace kept, with a warning naming the ConfigMap", deletes, e.keptNamespaces, warnings, out.Message)
				}
				return
			}
			if !slices.Equal(deletes, []string{"namespaces/gpu-operator"}) || len(warnings) > 0 {
				t.Errorf("deleted %v, warned %q: want the namespace deleted (its pods' owners gone, still gpuctl's)", deletes, warnings)
			}
		})
	}
}
