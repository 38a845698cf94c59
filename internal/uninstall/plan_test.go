package uninstall

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/kube/kubetest"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/record"
)

func TestUninstallDeletesOnlyTheCustomResourcesGpuctlCreated(t *testing.T) {
	helm := map[string]string{"meta.helm.sh/release-name": "gpu-operator", "meta.helm.sh/release-namespace": "gpu-operator"}
	applied := metav1.ManagedFieldsEntry{Manager: "gpuctl", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:driver":{}}}`)}}
	stack := []StackObject{
		stackObject("ClusterPolicy", "cluster-policy", "cp-1", helm),
		stackObject("NVIDIADriver", "default", "drv-1", helm),
		stackObject("NVIDIADriver", "team-a", "drv-2", nil, metav1.ManagedFieldsEntry{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate}),
		stackObject("ClusterPolicy", "applied", "cp-2", nil, applied),
	}
	rels := []PlannedRelease{{Name: "gpu-operator", Namespace: "gpu-operator", Role: RoleOperator}}
	for _, tc := range []struct {
		name       string
		rec        *record.Record
		wantDelete []string
		wantKept   []string
	}{
		{
			name: "by the record's UIDs: a same-named object someone re-created is another UID and stays",
			rec: &record.Record{TracksCustomResources: true, CustomResources: []record.Object{
				{Kind: "ClusterPolicy", Name: "cluster-policy", UID: "cp-1"}, {Kind: "NVIDIADriver", Name: "default", UID: "drv-old"}}},
			wantDelete: []string{"ClusterPolicy cluster-policy"},
			wantKept:   []string{"NVIDIADriver default (not created by gpuctl)", "NVIDIADriver team-a (not created by gpuctl)", "ClusterPolicy applied (not created by gpuctl)"},
		},
		{
			name:       "a record without UIDs: what gpuctl's release or its field manager made goes, the rest stays",
			rec:        &record.Record{},
			wantDelete: []string{"ClusterPolicy cluster-policy", "ClusterPolicy applied", "NVIDIADriver default"},
			wantKept:   []string{"NVIDIADriver team-a"},
		},
		{
			name:       "no record at all: the same",
			wantDelete: []string{"ClusterPolicy cluster-policy", "ClusterPolicy applied", "NVIDIADriver default"},
			wantKept:   []string{"NVIDIADriver team-a"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Plan{Releases: rels}
			planCustomResources(&Snapshot{Record: tc.rec, Stack: stack}, p)
			var deleted, kept []string
			for _, d := range p.Delete {
				deleted = append(deleted, d.String())
				if d.UID == "" || d.Step != stepDeleteCustomResources {
					t.Errorf("deletion %+v: no UID or step", d)
				}
			}
			for _, k := range p.Kept {
				s := k.String()
				if len(tc.wantKept) > 0 && !slices.Contains(tc.wantKept, s) {
					s = describe(k.Kind, k.Namespace, k.Name)
				}
				kept = append(kept, s)
			}
			slices.Sort(deleted)
			slices.Sort(kept)
			want, wantKept := slices.Sorted(slices.Values(tc.wantDelete)), slices.Sorted(slices.Values(tc.wantKept))
			if !slices.Equal(deleted, want) {
				t.Errorf("deleted %v, want %v", deleted, want)
			}
			if !slices.Equal(kept, wantKept) {
				t.Errorf("kept %v, want %v", kept, wantKept)
			}
		})
	}
}

// Build decides from a snapshot alone: what it reads is what Read read.
func TestBuild(t *testing.T) {
	// A GPU node with a label the operator wrote, and one NFD wrote: gpuctl's to give back only if it
	// installed them.
	gpuNode := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1",
		Labels: map[string]string{"nvidia.com/gpu.present": "true", "feature.node.kubernetes.io/pci-10de.present": "true"},
		ManagedFields: []metav1.ManagedFieldsEntry{kubetest.ManagedFields("gpu-operator", []string{"nvidia.com/gpu.present"}, nil),
			kubetest.ManagedFields("nfd-master", []string{"feature.node.kubernetes.io/pci-10de.present"}, nil)}}}
	recorded := func(names ...string) *record.Record {
		rec := &record.Record{Namespace: "gpu-operator", TracksCustomResources: true}
		for _, n := range names {
			rec.Releases = append(rec.Releases, record.Object{Name: n, Namespace: "gpu-operator", Created: true})
		}
		return rec
	}
	installed := func(names ...string) []InstalledRelease {
		var out []InstalledRelease
		for _, n := range names {
			out = append(out, InstalledRelease{Name: n, Namespace: "gpu-operator"})
		}
		return out
	}
	for _, tc := range []struct {
		name         string
		s            *Snapshot
		o            Options
		wantErr      any // a pointer to the error type Build returns, nil for none
		wantReleases []string
		wantDelete   []string // "step Kind namespace/name"
		wantNodes    []NodeLabelPlan
		wantPurge    *PurgePlan
	}{
		{name: "releases go in the reverse order of install, NFD's NodeFeatures with NFD's release",
			s: &Snapshot{Record: recorded(plan.NFDRelease, plan.OperatorRelease, plan.MonitoringRelease), Namespace: "gpu-operator",
				Releases:     installed(plan.NFDRelease, plan.OperatorRelease, plan.MonitoringRelease),
				NodeFeatures: map[string][]Ref{plan.NFDRelease: {{Namespace: "gpu-operator", Name: "gpu-1", UID: "nf-1"}}}},
			wantReleases: []string{plan.MonitoringRelease, plan.OperatorRelease, plan.NFDRelease},
			wantDelete:   []string{"uninstall-node-feature-discovery NodeFeature gpu-operator/gpu-1"}},
		{name: "node labels go back where gpuctl installed NFD and the operator",
			s:            &Snapshot{Record: recorded(plan.NFDRelease, plan.OperatorRelease), Releases: installed(plan.NFDRelease, plan.OperatorRelease), Nodes: []corev1.Node{gpuNode}},
			wantReleases: []string{plan.OperatorRelease, plan.NFDRelease},
			wantNodes:    []NodeLabelPlan{{Node: "gpu-1", RemoveLabels: []string{"feature.node.kubernetes.io/pci-10de.present", "nvidia.com/gpu.present"}}}},
		{name: "NFD's labels stay where gpuctl did not install NFD",
			s:            &Snapshot{Record: recorded(plan.OperatorRelease), Releases: installed(plan.OperatorRelease), Nodes: []corev1.Node{gpuNode}},
			wantReleases: []string{plan.OperatorRelease},
			wantNodes:    []NodeLabelPlan{{Node: "gpu-1", RemoveLabels: []string{"nvidia.com/gpu.present"}}}},
		{name: "no label goes where gpuctl installed neither",
			s:            &Snapshot{Record: recorded(plan.GKEDriverInstaller + "-cos"), Releases: installed(plan.GKEDriverInstaller + "-cos"), Nodes: []corev1.Node{gpuNode}},
			wantReleases: []string{plan.GKEDriverInstaller + "-cos"}},
		{name: "no record: releases of gpuctl's names are refused",
			s:       &Snapshot{Releases: installed(plan.OperatorRelease)},
			wantErr: new(*UnrecordedError)},
		{name: "no record: --adopt takes them, and the stack's node labels",
			s: &Snapshot{Releases: installed(plan.OperatorRelease), Nodes: []corev1.Node{gpuNode}}, o: Options{Adopt: true},
			wantReleases: []string{plan.OperatorRelease},
			wantNodes:    []NodeLabelPlan{{Node: "gpu-1", RemoveLabels: []string{"feature.node.kubernetes.io/pci-10de.present", "nvidia.com/gpu.present"}}}},
		{name: "no record and no release: nothing to do, no label taken",
			s: &Snapshot{Nodes: []corev1.Node{gpuNode}}},
		{name: "--purge without a record has nothing to purge, and says whether it was forced",
			s: &Snapshot{Releases: installed(plan.OperatorRelease)}, o: Options{Purge: true, Force: true, Adopt: true},
			wantReleases: []string{plan.OperatorRelease},
			wantPurge:    &PurgePlan{Forced: true}},
		{name: "--purge that would delete someone else's custom resources is refused, with its plan",
			s: &Snapshot{Record: recorded(), Purge: &PurgeSnapshot{CRDs: []FoundCRD{{Found: Found{Recorded: record.Object{Name: "nvidiadrivers.nvidia.com", Created: true}, UID: "crd-1"},
				Kind: "NVIDIADriver", Resources: []unstructured.Unstructured{*kubetest.CustomResource("NVIDIADriver", "team-a", "drv-2", nil)}}}}},
			o:          Options{Purge: true},
			wantErr:    new(*ForeignResourcesError),
			wantDelete: []string{"purge-crds CustomResourceDefinition nvidiadrivers.nvidia.com"},
			wantPurge: &PurgePlan{CRDs: []string{"nvidiadrivers.nvidia.com"}, Foreign: []string{"NVIDIADriver team-a"},
				Delete: []PlannedDeletion{{Step: stepPurgeCRDs, APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: "nvidiadrivers.nvidia.com", UID: "crd-1",
					Why: "created by gpuctl (install record of an older gpuctl, without UIDs: the object of that name now)"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Build(tc.s, tc.o)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("Build: %v", err)
			case tc.wantErr != nil && (!errors.As(err, tc.wantErr) || !errors.Is(err, preflight.ErrFailed)):
				t.Fatalf("Build: %v, want a %T that is a failed preflight", err, tc.wantErr)
			}
			if p == nil {
				if tc.wantReleases != nil || tc.wantPurge != nil {
					t.Fatal("no plan")
				}
				return
			}
			var rels, deletes []string
			for _, r := range p.Releases {
				rels = append(rels, r.Name)
			}
			for _, d := range append(slices.Clone(p.Delete), p.Purge.deletions(stepPurgeCRDs)...) {
				deletes = append(deletes, d.Step+" "+d.String())
			}
			if !slices.Equal(rels, tc.wantReleases) {
				t.Errorf("releases %v, want %v", rels, tc.wantReleases)
			}
			if !slices.Equal(deletes, tc.wantDelete) {
				t.Errorf("deletes %q, want %q", deletes, tc.wantDelete)
			}
			if got, _ := json.Marshal(p.Nodes); string(got) != mustJSON(t, tc.wantNodes) {
				t.Errorf("nodes %s, want %s", got, mustJSON(t, tc.wantNodes))
			}
			if got, _ := json.Marshal(p.Purge); string(got) != mustJSON(t, tc.wantPurge) {
				t.Errorf("purge %s, want %s", got, mustJSON(t, tc.wantPurge))
			}
		})
	}
}

// A release's role orders the plan; the document is as it was, names and namespaces only.
func TestAPlannedReleaseIsItsNameAndNamespace(t *testing.T) {
	b, err := json.Marshal(PlannedRelease{Name: plan.NFDRelease, Namespace: "gpu-operator", Role: RoleNFD})
	if err != nil || string(b) != `{"name":"node-feature-discovery","namespace":"gpu-operator"}` {
		t.Errorf("%s, %v", b, err)
	}
}
