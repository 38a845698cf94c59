package support

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// readArchive returns a written bundle's entries by full name, in order.
func readArchive(t *testing.T, b []byte) ([]string, map[string][]byte) {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	files := map[string][]byte{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		c, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		files[hdr.Name] = c
	}
	return names, files
}

func TestBundleWritesEveryFileWithAManifest(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	b := NewBundle("gpuctl.io/v1alpha1", "v1.2.3", now)
	b.AddText("namespaces/gpu-operator/logs/driver/nvidia-driver-ctr.log", "driver log", "loading module\nNGC_API_KEY=abc123secret\n")
	if err := b.AddObject("helm/gpu-operator/values-1.yaml", "values", map[string]any{"ngc": map[string]any{"apiKey": "abc123secret"}, "driver": map[string]any{"enabled": true}}); err != nil {
		t.Fatal(err)
	}
	if err := b.AddObject("versions.json", "versions", map[string]string{"gpuctl": "v1.2.3"}); err != nil {
		t.Fatal(err)
	}
	// A pod as the API returns it: managedFields and kubectl's last-applied copy are left out.
	pod := map[string]any{"metadata": map[string]any{"name": "p", "managedFields": []any{map[string]any{"manager": "kubectl"}},
		"annotations": map[string]any{lastApplied: `{"env":[{"name":"X","value":"abc123secret"}]}`, "keep": "me"}}}
	if err := b.AddObject("namespaces/gpu-operator/pods.yaml", "pods", []any{pod}); err != nil {
		t.Fatal(err)
	}
	b.Fail("nodes", apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("RBAC: no")))
	b.Fail("helm history of gpu-operator", errors.New(`query: failed to query with labels: secrets is forbidden: User "v" cannot list resource "secrets"`))
	b.Fail("namespaces/gpu-operator/logs/x/y.log", errors.New("container y is waiting to start"))
	b.Note("namespace openshift-nfd does not exist")

	var out bytes.Buffer
	m, err := b.Write(&out, "gpuctl-diagnose-20261126T120000Z", now)
	if err != nil {
		t.Fatal(err)
	}
	names, files := readArchive(t, out.Bytes())
	if names[0] != "gpuctl-diagnose-20261126T120000Z/manifest.json" {
		t.Errorf("the manifest is not first: %v", names)
	}
	var onDisk Manifest
	if err := json.Unmarshal(files[names[0]], &onDisk); err != nil {
		t.Fatal(err)
	}
	if onDisk.Kind != "DiagnoseManifest" || onDisk.APIVersion != "gpuctl.io/v1alpha1" || onDisk.GpuctlVersion != "v1.2.3" {
		t.Errorf("manifest head %+v", onDisk)
	}
	if len(onDisk.Files) != len(names)-1 || len(m.Files) != len(onDisk.Files) {
		t.Fatalf("manifest lists %d files, archive holds %d besides the manifest", len(onDisk.Files), len(names)-1)
	}
	for _, f := range onDisk.Files {
		c, ok := files["gpuctl-diagnose-20261126T120000Z/"+f.Name]
		if !ok || len(c) != f.Size || f.What == "" {
			t.Errorf("manifest entry %+v: in archive %v, size %d", f, ok, len(c))
		}
	}
	for name, c := range files {
		if strings.Contains(string(c), "abc123secret") {
			t.Errorf("%s holds the secret", name)
		}
		if strings.Contains(string(c), "managedFields") || strings.Contains(string(c), lastApplied) {
			t.Errorf("%s holds managedFields or the last-applied copy", name)
		}
	}
	if !strings.Contains(string(files["gpuctl-diagnose-20261126T120000Z/namespaces/gpu-operator/pods.yaml"]), "keep: me") {
		t.Error("other annotations were dropped")
	}
	redacted := map[string]string{}
	for _, r := range onDisk.Redactions {
		redacted[r.File] = r.What
	}
	if redacted["helm/gpu-operator/values-1.yaml"] != "ngc.apiKey" || redacted["namespaces/gpu-operator/logs/driver/nvidia-driver-ctr.log"] != "value of a credential-like key" {
		t.Errorf("redactions %+v", onDisk.Redactions)
	}
	if len(onDisk.Forbidden) != 2 || onDisk.Forbidden[0].What != "helm history of gpu-operator" || onDisk.Forbidden[1].What != "nodes" {
		t.Errorf("forbidden %+v", onDisk.Forbidden)
	}
	if len(onDisk.Errors) != 1 || len(onDisk.Notes) != 1 {
		t.Errorf("errors %+v, notes %+v", onDisk.Errors, onDisk.Notes)
	}
}

func TestBundleReplacesAFileAddedTwice(t *testing.T) {
	b := NewBundle("v", "v", time.Now())
	b.AddText("status.txt", "first", "one")
	b.AddText("status.txt", "second", "two")
	m := b.Manifest()
	if len(m.Files) != 1 || m.Files[0].What != "second" || m.Files[0].Size != 3 {
		t.Errorf("files %+v", m.Files)
	}
}
