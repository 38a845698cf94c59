package engine

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
)

// supportKey is an NGC key the user put in a --set value: it reaches the record and Helm's values.
const supportKey = "nvapi-unit-test-key-0123456789"

func memoryReleases(t *testing.T, revisions ...map[string]any) func(string) (*release.Client, error) {
	t.Helper()
	cfg := action.NewConfiguration()
	cfg.Releases = storage.Init(driver.NewMemory())
	for i, vals := range revisions {
		status := rcommon.StatusSuperseded
		if i == len(revisions)-1 {
			status = rcommon.StatusDeployed
		}
		err := cfg.Releases.Create(&releasev1.Release{Name: "gpu-operator", Namespace: "gpu-operator", Version: i + 1, Config: vals,
			Info:  &releasev1.Info{Status: status, LastDeployed: time.Date(2026, 11, 26, 10, i, 0, 0, time.UTC), Description: "Install complete"},
			Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "gpu-operator", Version: "v26.7.0", AppVersion: "v26.7.0"}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return func(ns string) (*release.Client, error) { return release.NewWithConfiguration(cfg, ns), nil }
}

func TestSupportCollectsABundleWithoutSecrets(t *testing.T) {
	ctx := context.Background()
	gpuNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-0", Labels: map[string]string{"nvidia.com/gpu.present": "true",
		"nvidia.com/cuda.driver.major": "580", "nvidia.com/cuda.driver.minor": "95", "nvidia.com/cuda.driver.rev": "05"}}}
	driverPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nvidia-driver-daemonset-x1", Namespace: "gpu-operator", Labels: map[string]string{"app": driverApp}},
		Spec: corev1.PodSpec{NodeName: "gpu-0", Containers: []corev1.Container{{Name: "nvidia-driver-ctr", Image: "nvcr.io/nvidia/driver:580.95.05-ubuntu24.04"}}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator"}}
	clients := checkCluster(nil, gpuNode, driverPod, ns)
	clients.Dynamic = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		health.ClusterPolicyResource(): "ClusterPolicyList", health.NVIDIADriverResource(): "NVIDIADriverList"},
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": map[string]any{"name": "cluster-policy"},
			"status": map[string]any{"state": "ready"}}})
	rec := &record.Record{GpuctlVersion: "v1.0.0", Command: "install", Result: "succeeded", Distribution: "kubeadm", Profile: "kubeadm",
		Namespace: "gpu-operator", OperatorVersion: "v26.7.0", Inputs: record.Inputs{Set: []string{"ngc.apiKey=" + supportKey}}}
	if err := record.Write(ctx, clients.Kube, rec); err != nil {
		t.Fatal(err)
	}
	s := &Support{
		Clients: clients, APIVersion: "gpuctl.io/v1alpha1", GpuctlVersion: "v1.2.3",
		Releases: memoryReleases(t, map[string]any{"driver": map[string]any{"enabled": true}}, map[string]any{"ngc": map[string]any{"apiKey": supportKey}}),
		StatusText: func(w io.Writer, r *StatusResult) error {
			_, err := fmt.Fprintf(w, "healthy=%v\n", r.Healthy)
			return err
		},
		CheckText: func(w io.Writer, r preflight.Report) error {
			_, err := fmt.Fprintf(w, "%d checks\n", len(r.Results))
			return err
		},
	}
	res, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	m, err := res.Bundle.Write(&out, "bundle", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range m.Files {
		names[f.Name] = true
	}
	for _, want := range []string{"versions.json", "install-record.json", "helm/gpu-operator/history.yaml", "helm/gpu-operator/values-1.yaml",
		"helm/gpu-operator/values-2.yaml", "cluster/clusterpolicies.yaml", "cluster/nvidiadrivers.yaml", "nodes.yaml",
		"namespaces/gpu-operator/pods.yaml", "status.json", "status.txt", "check-pre.json", "check-pre.txt"} {
		if !names[want] {
			t.Errorf("no %s in %v", want, m.Files)
		}
	}
	if bytes.Contains(out.Bytes(), []byte("unit-test-key")) {
		t.Error("the NGC key is in the compressed stream")
	}
	redacted := map[string]bool{}
	for _, r := range m.Redactions {
		redacted[r.File+" "+r.What] = true
	}
	for _, want := range []string{"helm/gpu-operator/values-2.yaml ngc.apiKey", "install-record.json NGC API key (nvapi-…)"} {
		if !redacted[want] {
			t.Errorf("no redaction %q: %+v", want, m.Redactions)
		}
	}
	// The Helm release in NFD's name is not there: a note, not an error.
	if !strings.Contains(strings.Join(m.Notes, "\n"), "no Helm release node-feature-discovery") {
		t.Errorf("notes %v", m.Notes)
	}
	t.Run("versions name the operator, the releases and each node's driver", func(t *testing.T) {
		var v Versions
		if err := json.Unmarshal(bundleFile(t, out.Bytes(), "bundle/versions.json"), &v); err != nil {
			t.Fatal(err)
		}
		want := NodeDriver{Version: "580.95.05", Image: "nvcr.io/nvidia/driver:580.95.05-ubuntu24.04"}
		if v.Gpuctl != "v1.2.3" || v.Kubernetes != "v1.37.2" || v.Operator != "v26.7.0" || v.Drivers["gpu-0"] != want ||
			!strings.Contains(v.Releases["gpu-operator"], "revision 2, deployed") {
			t.Errorf("versions %+v", v)
		}
	})
}

func TestSupportStopsOnInterrupt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	clients := checkCluster(nil)
	clients.Dynamic = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		health.ClusterPolicyResource(): "ClusterPolicyList", health.NVIDIADriverResource(): "NVIDIADriverList"})
	_, err := (&Support{Clients: clients, Releases: memoryReleases(t)}).Run(ctx)
	if err == nil {
		t.Fatal("an interrupted collection returned a bundle")
	}
}

// bundleFile reads one file of a written bundle.
func bundleFile(t *testing.T, tgz []byte, name string) []byte {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err != nil {
			t.Fatalf("no %s in the bundle: %v", name, err)
		}
		if hdr.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}
