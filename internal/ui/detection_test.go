package ui

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/detect"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// The detection results are internal/detect's golden files: what detection really returns for its
// fixture clusters. This renders each and compares with testdata/<name>.txt.
func TestPrintDetectionGolden(t *testing.T) {
	for _, name := range []string{"gke", "kubeadm-operator", "tkgs"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "detect", "testdata", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var r detect.Result
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := PrintDetection(&buf, &r); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".txt")
			if *update {
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if buf.String() != string(want) {
				t.Errorf("table differs from %s (run with -update after checking):\n%s", path, buf.String())
			}
			if name == "gke" {
				for _, want := range []string{
					"cloud.google.com/gke-nodepool=",                         // why this distribution
					"cloud.google.com/gke-accelerator=nvidia-tesla-t4 (GKE)", // why this GPU node
					"kube-system/nvidia-gpu-device-plugin-small-cos (gke)",   // what exists
					"Autopilot:",
					"Tainting GPU nodes: safe",
				} {
					if !strings.Contains(buf.String(), want) {
						t.Errorf("table lacks %q:\n%s", want, buf.String())
					}
				}
			}
		})
	}
}
