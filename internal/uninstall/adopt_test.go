package uninstall

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/release"
)

// Without an install record nothing says what gpuctl made: releases of gpuctl's names are refused
// (exit 5, naming them, whether they carry gpuctl's label, and --adopt) before anything is written,
// unless adopted; with none, there is nothing to uninstall, and no node label is taken.
func TestUninstallWithoutARecordRefusesUnlessAdopted(t *testing.T) {
	gpuctls := map[string]string{detect.ManagedReleaseLabel: "true"}
	// A GPU node with a label the operator wrote: gpuctl's to remove only if the operator is.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{"nvidia.com/gpu.present": "true"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "gpu-operator", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:nvidia.com/gpu.present":{}}}}`)}}}}}
	for _, tc := range []struct {
		name         string
		releases     map[string]map[string]string
		adopt        bool
		wantRefusal  []string // what the refusal names; nil: no refusal
		wantReleases []string
		wantNodes    bool
	}{
		{name: "releases of gpuctl's names are refused, each said to carry gpuctl's label or not",
			releases: map[string]map[string]string{plan.OperatorRelease: gpuctls, plan.NFDRelease: nil},
			wantRefusal: []string{"no install record kube-system/gpuctl-install", "gpu-operator/gpu-operator (labelled gpuctl.io/managed=true)",
				"gpu-operator/node-feature-discovery (no gpuctl.io/managed label)", "--adopt"}},
		{name: "a release without gpuctl's label is not taken either",
			releases:    map[string]map[string]string{plan.OperatorRelease: {"team": "ml"}},
			wantRefusal: []string{"gpu-operator/gpu-operator (no gpuctl.io/managed label)", "--adopt"}},
		{name: "--adopt takes them, and the stack's node labels with them",
			releases: map[string]map[string]string{plan.OperatorRelease: gpuctls, plan.NFDRelease: nil}, adopt: true,
			wantReleases: []string{plan.OperatorRelease, plan.NFDRelease}, wantNodes: true},
		{name: "no record and no such release: nothing to uninstall, no label taken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := fake.NewClientset(node.DeepCopy())
			rc := helmInSecrets(t, kc, tc.releases)
			kc.ClearActions()
			r := &reader{clients: &kube.Clients{Kube: kc, Dynamic: stackDynamicClient(), Namespace: "gpu-operator"},
				helm: release.ClientsOf(map[string]*release.Client{"gpu-operator": rc})}
			o := Options{Adopt: tc.adopt}
			// As the engine asks: before the lock of what ReadReleases read, then Build of what Read read.
			pre, err := r.refusal(t.Context(), o)
			if err != nil {
				t.Fatal(err)
			}
			refused := RefuseUnrecorded(pre, o)
			s, err := r.read(t.Context(), o)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Build(s, o)
			if tc.wantRefusal != nil {
				var ue *UnrecordedError
				if !errors.As(err, &ue) || !errors.Is(err, preflight.ErrFailed) || refused == nil || refused.Error() != err.Error() {
					t.Fatalf("Plan: %v; RefuseUnrecorded: %v; want an UnrecordedError, a failed preflight", err, refused)
				}
				for _, want := range tc.wantRefusal {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("refusal %q lacks %q", err, want)
					}
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("refusal %q is more than one line", err)
				}
				for _, a := range kc.Actions() {
					if !slices.Contains([]string{"get", "list", "watch"}, a.GetVerb()) {
						t.Errorf("the refusal wrote: %s %s", a.GetVerb(), a.GetResource().Resource)
					}
				}
				return
			}
			if err != nil || refused != nil {
				t.Fatalf("Plan: %v; RefuseUnrecorded: %v", err, refused)
			}
			var rels []string
			for _, r := range p.Releases {
				rels = append(rels, r.Name)
			}
			if !slices.Equal(rels, tc.wantReleases) {
				t.Errorf("releases %v, want %v", rels, tc.wantReleases)
			}
			if got := len(p.Nodes) > 0; got != tc.wantNodes {
				t.Errorf("node label changes %+v, want some: %v", p.Nodes, tc.wantNodes)
			}
		})
	}
}
