package engine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/render"
)

// specMapsWithImages walks a ClusterPolicy spec and calls f for every map naming an image repository.
func specMapsWithImages(m map[string]any, path string, f func(path string, m map[string]any)) {
	if repo, _ := m["repository"].(string); repo != "" {
		f(path, m)
	}
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			specMapsWithImages(sub, path+"."+k, f)
		}
	}
}

func TestImagePullSecret(t *testing.T) {
	render := func(t *testing.T, o InstallOptions) (pods map[string][]any, policy map[string]any) {
		t.Helper()
		manifest, _, err := (&Template{Options: o, KubeVersion: "1.33"}).Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		objs, err := render.DecodeManifest(manifest)
		if err != nil {
			t.Fatal(err)
		}
		pods = map[string][]any{}
		for _, u := range objs {
			if u.GetKind() == "ClusterPolicy" {
				policy, _ = u.Object["spec"].(map[string]any)
				continue
			}
			if ps := render.PodSpecOf(u.GetKind(), u.Object); ps != nil {
				s, _ := ps["imagePullSecrets"].([]any)
				pods[u.GetKind()+" "+u.GetName()] = s
			}
		}
		return pods, policy
	}
	for _, b := range bundle.List() {
		for _, prof := range []string{"kubeadm", "gke", "tkgs"} {
			t.Run(prof+" at "+b.Version+": every pod and every ClusterPolicy image carries the pull secret", func(t *testing.T) {
				pods, policy := render(t, InstallOptions{Profile: prof, OperatorVersion: b.Version, ImagePullSecrets: []string{"regcred"}})
				if len(pods) < 4 || policy == nil {
					t.Fatalf("rendered %d workloads, ClusterPolicy %v", len(pods), policy != nil)
				}
				for name, secrets := range pods {
					if !slices.ContainsFunc(secrets, func(s any) bool { m, _ := s.(map[string]any); return m["name"] == "regcred" }) {
						t.Errorf("%s: imagePullSecrets %v", name, secrets)
					}
				}
				n := 0
				specMapsWithImages(policy, "spec", func(path string, m map[string]any) {
					// A driver manager is an init container of its parent's pod (driver, vGPU or VFIO
					// manager), which pulls it with the parent's secrets; NVIDIA's chart renders no
					// secrets of its own for it.
					if strings.HasSuffix(path, ".manager") || strings.HasSuffix(path, ".driverManager") {
						return
					}
					n++
					s, _ := m["imagePullSecrets"].([]any)
					if !slices.Contains(s, any("regcred")) {
						t.Errorf("%s: imagePullSecrets %v", path, s)
					}
					if prof == "tkgs" && path == "spec.driver" && !slices.Contains(s, any("ngc-secret")) {
						t.Errorf("%s: the profile's ngc-secret was dropped: %v", path, s)
					}
				})
				if n < 8 {
					t.Errorf("only %d image fields in the ClusterPolicy", n)
				}
			})
		}
	}

	t.Run("-f still wins over --image-pull-secret", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "v.yaml")
		if err := os.WriteFile(file, []byte("toolkit:\n  imagePullSecrets: [mine]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, policy := render(t, InstallOptions{Profile: "kubeadm", ImagePullSecrets: []string{"regcred"}, ValuesFiles: []string{file}})
		tk, _ := policy["toolkit"].(map[string]any)
		if s, _ := tk["imagePullSecrets"].([]any); !slices.Equal(s, []any{"mine"}) {
			t.Errorf("toolkit.imagePullSecrets %v, want [mine]", s)
		}
	})
}
