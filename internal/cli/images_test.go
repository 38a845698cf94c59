package cli

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// update rewrites every generated file these tests compare with: testdata goldens, docs/schemas
// and docs/reference.
var update = flag.Bool("update", false, "rewrite the golden files under testdata/, docs/schemas and docs/reference")

func TestImagesCommand(t *testing.T) {
	t.Run("images --profile gke prints the golden list without a cluster", func(t *testing.T) {
		code, out, errOut := run(t, nil, "images", "--profile", "gke", "--kube-version", "1.33", "--kubeconfig", "/nonexistent")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		golden := filepath.Join("testdata", "images-gke.golden")
		if *update {
			if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if out != string(want) {
			t.Errorf("output differs from %s (refresh with -update):\n%s", golden, out)
		}
	})

	t.Run("images -o json names its kind and version and lists the images", func(t *testing.T) {
		code, out, errOut := run(t, nil, "images", "--profile", "kubeadm", "--kube-version", "1.33", "--node-os", "rhel9", "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var doc struct {
			APIVersion, Kind string
			NodeOS           []string
			Images           []struct{ Image string }
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.APIVersion == "" || doc.Kind != "ImageList" || len(doc.Images) == 0 || strings.Join(doc.NodeOS, ",") != "rhel9" {
			t.Errorf("document: %+v", doc)
		}
		if !strings.Contains(out, "-rhel9\"") {
			t.Errorf("no rhel9 driver image:\n%s", out)
		}
	})

	t.Run("a --node-os that cannot be a tag suffix is a usage error naming it", func(t *testing.T) {
		code, _, errOut := run(t, nil, "images", "--profile", "kubeadm", "--node-os", "Ubuntu 22.04")
		if code != ExitUsage || !strings.Contains(errOut, "--node-os") {
			t.Errorf("exit %d: %s", code, errOut)
		}
	})

	for _, cmd := range []string{"images", "template", "install"} {
		t.Run(cmd+" refuses an invalid --registry with exit 2, naming it", func(t *testing.T) {
			code, _, errOut := run(t, nil, cmd, "--profile", "kubeadm", "--registry", "https://mirror.example/", "--kubeconfig", "/nonexistent")
			if code != ExitUsage || !strings.Contains(errOut, "--registry") || strings.Count(strings.TrimSpace(errOut), "\n") > 1 {
				t.Errorf("exit %d: %s", code, errOut)
			}
		})
	}
	t.Run("an --image-pull-secret that is no Secret name is a usage error naming it", func(t *testing.T) {
		code, _, errOut := run(t, nil, "template", "--profile", "kubeadm", "--image-pull-secret", "Reg Cred")
		if code != ExitUsage || !strings.Contains(errOut, "--image-pull-secret") {
			t.Errorf("exit %d: %s", code, errOut)
		}
	})
}
