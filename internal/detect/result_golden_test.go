package detect

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestResultGolden keeps each fixture cluster's detection result as JSON in testdata/; internal/ui
// renders the same files into its golden tables, so the tables show what detection really returns.
func TestResultGolden(t *testing.T) {
	tests := []struct {
		name     string
		golden   string
		snapshot func() *Snapshot
	}{
		{"a GKE cluster with GKE's device plugin", "gke.json", gkeCluster},
		{"a kubeadm cluster with a Helm-installed operator", "kubeadm-operator.json", func() *Snapshot {
			s := kubeadmCluster()
			labels("nvidia.com/gpu.present", "true", "nvidia.com/gpu.deploy.device-plugin", "true",
				"feature.node.kubernetes.io/pci-10de.present", "true", "nvidia.com/gpu.count", "4", "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3")(&s.Nodes[1])
			s.Workloads = append(s.Workloads, operatorDeployment("gpu-operator", "gpu-operator"), operandDevicePlugin("gpu-operator"))
			s.Workloads = append(s.Workloads, nfdWorkloads("gpu-operator", "gpu-operator")...)
			s.HelmReleases = []HelmRelease{{Name: "gpu-operator", Namespace: "gpu-operator", Revision: 1, Status: "deployed", Chart: "gpu-operator", ChartVersion: "v26.7.0", Storage: "Secret"}}
			s.ClusterPolicies = []ClusterPolicy{{Name: "cluster-policy", Created: time.Unix(0, 0), State: "ready", ReadyReason: "Reconciled"}}
			return s
		}},
		{"a TKGS guest cluster with a vGPU pool before NFD", "tkgs.json", tkgsCluster},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.MarshalIndent(Analyze(tc.snapshot()), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			buf := bytes.NewBuffer(append(b, '\n'))
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
				t.Errorf("result differs from %s (run with -update after checking, then go test ./internal/ui -update):\n%s", path, buf.String())
			}
		})
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
