package engine

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// repositoryLine matches a non-empty repository value in a rendered manifest (the ClusterPolicy's).
var repositoryLine = regexp.MustCompile(`(?m)^\s+repository: "?([^"\s]+)"?$`)

func TestRegistry(t *testing.T) {
	const mirror = "mirror.example:5000"
	for _, b := range bundle.List() {
		for _, prof := range []string{"kubeadm", "gke", "tkgs"} {
			t.Run(prof+" at "+b.Version+": --registry moves every image and every ClusterPolicy repository under the mirror", func(t *testing.T) {
				o := InstallOptions{Profile: prof, OperatorVersion: b.Version, Registry: mirror}
				want, list := renderedImages(t, o, []string{"ubuntu22.04", "rhel9"})
				got := imageRefs(list)
				if !slices.Equal(got, want) {
					t.Errorf("images %q, want the rendered %q", got, want)
				}
				if len(got) < 5 {
					t.Fatalf("only %d images: %q", len(got), got)
				}
				for _, img := range got {
					if !strings.HasPrefix(img, mirror+"/") {
						t.Errorf("%s is not under the mirror", img)
					}
				}
				manifest, _, err := (&Template{Options: o, KubeVersion: "1.33"}).Run(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range repositoryLine.FindAllStringSubmatch(manifest, -1) {
					if !strings.HasPrefix(m[1], mirror+"/") {
						t.Errorf("repository %s is not under the mirror", m[1])
					}
				}
				// Paths are kept: the operator image is the bundle's under the mirror.
				op := b.Images["operator"]
				if wantOp := plan.MirrorRepository(op.Repository, mirror) + "/" + op.Image + ":" + op.Version; !slices.Contains(got, wantOp) {
					t.Errorf("no %s in %q", wantOp, got)
				}
			})
		}
	}

	t.Run("-f and --set still win over --registry, and the Plan shows the layer between detected and the user's", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "values.yaml")
		if err := os.WriteFile(file, []byte("toolkit:\n  repository: files.example/k8s\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		o := InstallOptions{Profile: "kubeadm", Registry: mirror, ValuesFiles: []string{file},
			Set: []string{"driver.repository=set.example/nvidia", "node-feature-discovery.image.repository=set.example/nfd"}}
		list, err := (&Images{Options: o, KubeVersion: "1.33", NodeOS: []string{"ubuntu22.04"}}).Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		refs := strings.Join(imageRefs(list), "\n")
		for _, want := range []string{"files.example/k8s/container-toolkit:", "set.example/nvidia/driver:", "set.example/nfd:", mirror + "/nvidia/gpu-operator:"} {
			if !strings.Contains(refs, want) {
				t.Errorf("no %s in\n%s", want, refs)
			}
		}
		_, p, err := (&Template{Options: o, KubeVersion: "1.33"}).Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"release-gpu-operator", "release-node-feature-discovery"} {
			var sources []string
			for _, l := range p.Step(id).Release.Layers {
				sources = append(sources, l.Source)
			}
			i := slices.Index(sources, "--registry "+mirror)
			if i < 0 || !strings.HasPrefix(sources[i-1], "detected") && !strings.HasPrefix(sources[i-1], "profile") || sources[len(sources)-1] != "--set" {
				t.Errorf("%s layers: %q", id, sources)
			}
		}
	})
}
