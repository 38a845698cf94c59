package detect

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestTableGolden(t *testing.T) {
	tests := []struct {
		name     string
		golden   string
		snapshot func() *Snapshot
	}{
		{"a GKE cluster with GKE's device plugin", "gke.txt", gkeCluster},
		{"a kubeadm cluster with a Helm-installed operator", "kubeadm-operator.txt", func() *Snapshot {
			s := kubeadmCluster()
			labels("nvidia.com/gpu.present", "true", "nvidia.com/gpu.deploy.device-plugin", "true",
				"feature.node.kubernetes.io/pci-10de.present", "true", "nvidia.com/gpu.count", "4", "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3")(&s.Nodes[1])
			s.Workloads = append(s.Workloads, operatorDeployment("gpu-operator", "gpu-operator"), operandDevicePlugin("gpu-operator"))
			s.Workloads = append(s.Workloads, nfdWorkloads("gpu-operator", "gpu-operator")...)
			s.HelmReleases = []HelmRelease{{Name: "gpu-operator", Namespace: "gpu-operator", Revision: 1, Status: "deployed", Chart: "gpu-operator", ChartVersion: "v26.7.0", Storage: "Secret"}}
			s.ClusterPolicies = []ClusterPolicy{{Name: "cluster-policy", Created: time.Unix(0, 0), State: "ready", ReadyReason: "Reconciled"}}
			return s
		}},
		{"a TKGS guest cluster with a vGPU pool before NFD", "tkgs.txt", tkgsCluster},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Analyze(tc.snapshot()).Table(&buf); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.golden)
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
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
		})
	}
}

func TestTableSaysWhy(t *testing.T) {
	var buf bytes.Buffer
	if err := Analyze(gkeCluster()).Table(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"gke v1.33.4-gke.1172000 (Google Kubernetes Engine)",
		"cloud.google.com/gke-nodepool=",                         // why this distribution
		"cloud.google.com/gke-accelerator=nvidia-tesla-t4 (GKE)", // why this GPU node
		"kube-system/nvidia-gpu-device-plugin-small-cos (gke)",   // what exists
		"Autopilot:",
		"Tainting GPU nodes: safe",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestResultSerialises(t *testing.T) {
	r := Analyze(gkeCluster())
	t.Run("as JSON that reads back the same", func(t *testing.T) {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Result
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Errorf("JSON round trip changed the result:\n%s", b)
		}
		for _, key := range []string{`"distribution":`, `"candidates":`, `"gpuNodes":`, `"pools":`, `"scheduling":`, `"existing":`, `"reasons":`} {
			if !bytes.Contains(b, []byte(key)) {
				t.Errorf("JSON lacks %s", key)
			}
		}
	})
	t.Run("as YAML", func(t *testing.T) {
		b, err := yaml.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("name: gke")) {
			t.Errorf("YAML lacks the distribution:\n%s", b)
		}
	})
}
