package engine

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/render"
)

// workloadImageLine matches a container's image in a rendered manifest ("image: repo/name:tag"); the
// ClusterPolicy's image fields are bare names and CRD schemas have none.
var workloadImageLine = regexp.MustCompile(`(?m)^\s+(?:- )?image: "?([^"\s]+/[^"\s]+)"?$`)

func renderedImages(t *testing.T, o InstallOptions, nodeOS []string) (want []string, list *render.ImageList) {
	t.Helper()
	ctx := context.Background()
	manifest, _, err := (&Template{Options: o, KubeVersion: "1.33"}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	for _, m := range workloadImageLine.FindAllStringSubmatch(manifest, -1) {
		set[m[1]] = true
	}
	objs, err := render.DecodeManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Get(o.OperatorVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if u.GetKind() != "ClusterPolicy" {
			continue
		}
		spec, _ := u.Object["spec"].(map[string]any)
		ops, _ := bundle.OperandImages(b.Version, spec, nodeOS, nil)
		for _, op := range ops {
			set[op.Image] = true
		}
	}
	for img := range set {
		want = append(want, img)
	}
	slices.Sort(want)
	list, err = (&Images{Options: o, NodeOS: nodeOS, KubeVersion: "1.33"}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return want, list
}

func imageRefs(l *render.ImageList) []string {
	var out []string
	for _, i := range l.Images {
		out = append(out, i.Image)
	}
	return out
}

func TestImagesAreTheRenderedOnes(t *testing.T) {
	for _, b := range bundle.List() {
		for _, prof := range []string{"kubeadm", "gke", "tkgs", "openshift"} {
			t.Run(prof+" at "+b.Version+" lists the workload images of the rendered charts and the ClusterPolicy's operands", func(t *testing.T) {
				o := InstallOptions{Profile: prof, OperatorVersion: b.Version}
				want, list := renderedImages(t, o, []string{"ubuntu22.04", "rhel9"})
				if got := imageRefs(list); !slices.Equal(got, want) {
					t.Errorf("images:\n %q\nwant (rendered):\n %q", got, want)
				}
				if list.OperatorVersion != b.Version {
					t.Errorf("operator version %q, want %q", list.OperatorVersion, b.Version)
				}
				if prof == "openshift" {
					if !strings.Contains(strings.Join(list.Notes, " "), "OLM") {
						t.Errorf("openshift: no note about OLM: %q", list.Notes)
					}
					return
				}
				if op := b.Images["operator"].String(); !slices.Contains(imageRefs(list), op) {
					t.Errorf("the operator image %s is not listed", op)
				}
				if nfd := b.NFD.String(); !slices.Contains(imageRefs(list), nfd) {
					t.Errorf("the NFD image %s is not listed", nfd)
				}
			})
		}
	}
	t.Run("kubeadm lists the driver image for each node OS considered", func(t *testing.T) {
		_, list := renderedImages(t, InstallOptions{Profile: "kubeadm"}, []string{"ubuntu22.04", "rhel9"})
		d := bundle.Default().Images["driver"].String()
		for _, os := range []string{"ubuntu22.04", "rhel9"} {
			if !slices.Contains(imageRefs(list), d+"-"+os) {
				t.Errorf("no %s-%s in %q", d, os, imageRefs(list))
			}
		}
	})
}

func TestNodeOSTags(t *testing.T) {
	nodes := []detect.GPUNode{
		{OSImage: "Ubuntu 22.04.4 LTS"}, {OSImage: "Ubuntu 22.04.5 LTS"},
		{OSImage: "Red Hat Enterprise Linux 9.4 (Plow)"}, {OSImage: "Red Hat Enterprise Linux CoreOS 418.94.202410090804-0"},
		{OSImage: "Rocky Linux 8.10 (Green Obsidian)"}, {OSImage: "Container-Optimized OS from Google"},
	}
	tags, from := render.NodeOSTags(nodes)
	if want := []string{"rhcos4.18", "rhel9", "rocky8", "ubuntu22.04"}; !slices.Equal(tags, want) {
		t.Errorf("tags %q, want %q", tags, want)
	}
	if !strings.Contains(from, "Container-Optimized OS") {
		t.Errorf("from %q does not name the OS it did not recognise", from)
	}
}
