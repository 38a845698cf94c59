package uninstall

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuctl/gpuctl/internal/kube/kubetest"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/record"
)

// purgePlan is the purge plan Build makes of s.
func purgePlan(t *testing.T, s *Snapshot) *PurgePlan {
	t.Helper()
	p, err := Build(s, Options{Purge: true})
	if err != nil {
		t.Fatal(err)
	}
	return p.Purge
}

// --purge deletes by the record's UIDs, keeps an object of a recorded name that is not the one gpuctl
// created, and keeps the namespace gpuctl created when it holds anything gpuctl did not create,
// naming what; everything Kubernetes, the release and the operator put there is gpuctl's. The same
// plan comes of the snapshot written by hand and of the one Read reads from the cluster it describes.
func TestPurgePlanDeletesByUIDAndKeepsWhatIsNotGpuctls(t *testing.T) {
	teamNotes := nsItem("v1", "ConfigMap", "team-notes", "notes-1", nil)
	for _, tc := range []struct {
		name       string
		extra      []*unstructured.Unstructured
		wantDelete []string
		wantKept   []string
		wantNS     []KeptNamespace
	}{
		{name: "a namespace with nothing but gpuctl's objects goes; a CRD of gpuctl's name someone re-created stays",
			wantDelete: []string{"purge-objects Secret gpu-operator/ngc-secret ngc-1", "purge-crds CustomResourceDefinition nvidiadrivers.nvidia.com crd-1",
				"purge-namespaces Namespace gpu-operator ns-1"},
			wantKept: []string{"CustomResourceDefinition gpuclusters.nvidia.com (not the one gpuctl created (UID differs))"}},
		{name: "a ConfigMap someone created keeps the namespace, named",
			extra:      []*unstructured.Unstructured{teamNotes},
			wantDelete: []string{"purge-objects Secret gpu-operator/ngc-secret ngc-1", "purge-crds CustomResourceDefinition nvidiadrivers.nvidia.com crd-1"},
			wantKept:   []string{"CustomResourceDefinition gpuclusters.nvidia.com (not the one gpuctl created (UID differs))"},
			wantNS:     []KeptNamespace{{Name: "gpu-operator", Holds: []string{"ConfigMap team-notes"}}}},
	} {
		snapshots := map[string]func(t *testing.T) *Snapshot{
			"of a snapshot": func(*testing.T) *Snapshot { return purgeSnapshot(purgeRecord(), tc.extra...) },
			"of what Read finds": func(t *testing.T) *Snapshot {
				var extra []runtime.Object
				for _, o := range tc.extra {
					extra = append(extra, o.DeepCopy())
				}
				clients, _ := purgeCluster(extra...)
				s := &Snapshot{Record: purgeRecord(), Namespace: "gpu-operator", Releases: []InstalledRelease{{Name: "gpu-operator", Namespace: "gpu-operator"}}}
				var err error
				if s.Purge, err = (&reader{clients: clients}).purge(t.Context(), s); err != nil {
					t.Fatal(err)
				}
				return s
			},
		}
		for _, via := range []string{"of a snapshot", "of what Read finds"} {
			t.Run(tc.name+", "+via, func(t *testing.T) {
				pp := purgePlan(t, snapshots[via](t))
				var deletes, kept []string
				for _, d := range pp.Delete {
					deletes = append(deletes, d.Step+" "+d.String()+" "+string(d.UID))
				}
				for _, k := range pp.Kept {
					kept = append(kept, k.String())
				}
				if !slices.Equal(deletes, tc.wantDelete) {
					t.Errorf("deletes\n%q\nwant\n%q", deletes, tc.wantDelete)
				}
				if !slices.Equal(kept, tc.wantKept) {
					t.Errorf("kept %q, want %q", kept, tc.wantKept)
				}
				if !reflect.DeepEqual(pp.KeptNamespaces, tc.wantNS) {
					t.Errorf("kept namespaces %+v, want %+v", pp.KeptNamespaces, tc.wantNS)
				}
			})
		}
	}
	t.Run("a Secret of gpuctl's name with another UID stays, and keeps the namespace too", func(t *testing.T) {
		rec := purgeRecord()
		rec.Objects[0].UID = "ngc-gone"
		pp := purgePlan(t, purgeSnapshot(rec))
		if len(pp.deletions(stepPurgeObjects)) != 0 || !slices.ContainsFunc(pp.Kept, func(k KeptObject) bool {
			return k.String() == "Secret gpu-operator/ngc-secret (not the one gpuctl created (UID differs))"
		}) {
			t.Errorf("deletes %+v, kept %+v: want Secret ngc-secret kept", pp.Delete, pp.Kept)
		}
		if want := []KeptNamespace{{Name: "gpu-operator", Holds: []string{"Secret ngc-secret"}}}; !reflect.DeepEqual(pp.KeptNamespaces, want) {
			t.Errorf("kept namespaces %+v, want %+v", pp.KeptNamespaces, want)
		}
	})
	t.Run("a record of an older gpuctl without UIDs deletes by name, and says so", func(t *testing.T) {
		rec := purgeRecord()
		for _, l := range [][]record.Object{rec.Objects, rec.CRDs, rec.Namespaces} {
			for i := range l {
				l[i].UID = ""
			}
		}
		pp := purgePlan(t, purgeSnapshot(rec))
		if len(pp.Delete) != 4 || len(pp.Kept) != 0 {
			t.Fatalf("deletes %+v, kept %+v: want the Secret, both CRDs and the namespace by name", pp.Delete, pp.Kept)
		}
		for _, d := range pp.Delete {
			if d.UID == "" || !strings.Contains(d.Why, "without UIDs") {
				t.Errorf("deletion %+v: want the UID seen now and a why that says the record has none", d)
			}
		}
	})
}

func TestPurgeRefusesCRDsWithCustomResourcesGpuctlDidNotCreate(t *testing.T) {
	rec := &record.Record{CRDs: []record.Object{{Name: "nvidiadrivers.nvidia.com", Created: true}, {Name: "gone.nvidia.com", Created: true}}}
	// The CRD gpuctl created is there (the other is gone), with two NVIDIADrivers: one this uninstall
	// deletes itself, one someone else's.
	s := &Snapshot{Record: rec, Purge: &PurgeSnapshot{CRDs: []FoundCRD{{Found: Found{Recorded: rec.CRDs[0]}, Kind: "NVIDIADriver",
		Resources: []unstructured.Unstructured{*kubetest.CustomResource("NVIDIADriver", "default", "drv-1", nil), *kubetest.CustomResource("NVIDIADriver", "team-a", "drv-2", nil)}}}}}
	planned := &Plan{Delete: []PlannedDeletion{{Kind: "NVIDIADriver", Name: "default", UID: "drv-1"}}}
	for _, force := range []bool{false, true} {
		pp, err := planPurge(s, planned, force)
		var fe *ForeignResourcesError
		if force {
			if err != nil {
				t.Errorf("--force: %v", err)
			}
		} else if !errors.As(err, &fe) || !errors.Is(err, preflight.ErrFailed) || !reflect.DeepEqual(fe.Objects, []string{"NVIDIADriver team-a"}) {
			t.Errorf("without --force: %v, want a ForeignResourcesError naming NVIDIADriver team-a and nothing gpuctl deletes itself", err)
		}
		if pp == nil || !slices.Equal(pp.CRDs, []string{"nvidiadrivers.nvidia.com"}) || !slices.Equal(pp.Foreign, []string{"NVIDIADriver team-a"}) || pp.Forced != force {
			t.Errorf("force %v: purge plan %+v", force, pp)
		}
	}
}
