package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"path/filepath"
	"testing"

	"github.com/distribution/distribution/v3/configuration"
	distribution "github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/registry"

	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/release"
)

func TestOCIRepository(t *testing.T) {
	for _, tc := range []struct {
		url, want string
		refused   bool
	}{
		{url: "oci://registry.example.com/gpuctl", want: "registry.example.com/gpuctl"},
		{url: "oci://localhost:5000/charts/gpuctl/", want: "localhost:5000/charts/gpuctl"},
		{url: "oci://registry.example.com", want: "registry.example.com"},
		{url: "https://charts.example.com/gpuctl", refused: true},
		{url: "registry.example.com/gpuctl", refused: true},
		{url: "oci:///gpuctl", refused: true},
		{url: "oci://registry.example.com/gpuctl:v1", refused: true},
		{url: "oci://localhost:5000/gpuctl:latest", refused: true},
		{url: "oci://registry.example.com/gpuctl@sha256:0123", refused: true},
	} {
		t.Run(tc.url, func(t *testing.T) {
			got, err := OCIRepository(tc.url)
			var refused *OCIRepositoryError
			if tc.refused != errors.As(err, &refused) || got != tc.want {
				t.Errorf("%q, %v; want %q, refused %v", got, err, tc.want, tc.refused)
			}
		})
	}
}

// TestPush: charts push pushes every chart charts save writes, each at the reference and with the
// digest its plan names, to a real OCI registry (the distribution registry Helm's own tests use,
// on loopback); Helm's client pulls back exactly charts save's archives.
func TestPush(t *testing.T) {
	host := startRegistry(t)
	url := "oci://" + host + "/gpuctl/charts"
	planned, _, err := PushPlan(url)
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := Push(t.Context(), url, PushOptions{PlainHTTP: true, RegistryConfig: filepath.Join(t.TempDir(), "config.json")})
	if err != nil {
		t.Fatal(err)
	}
	if len(pushed) != len(planned) || len(planned) == 0 {
		t.Fatalf("pushed %d charts, the plan has %d", len(pushed), len(planned))
	}
	saved, err := SaveRepository(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	savedDigest := map[string]string{}
	for _, s := range saved {
		savedDigest[s.Name+" "+s.Version] = "sha256:" + s.Digest
	}
	client, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "config.json")))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pushed {
		if p.Reference != host+"/gpuctl/charts/"+p.Name+":"+p.Version || p.Reference != planned[i].Reference || p.Digest != planned[i].Digest {
			t.Errorf("pushed %+v, the plan says %+v", p, planned[i])
		}
		if p.Manifest == "" {
			t.Errorf("%s: no manifest digest", p.Reference)
		}
		pulled, err := client.Pull(p.Reference)
		if err != nil {
			t.Fatalf("pull %s: %v", p.Reference, err)
		}
		archived, err := loader.LoadArchive(bytes.NewReader(pulled.Chart.Data))
		if err != nil {
			t.Fatalf("%s: %v", p.Reference, err)
		}
		appVersion := ""
		if p.Name == plan.OperatorRelease {
			appVersion = "v" + p.Version
		}
		if embedded, err := LoadChart(p.Name, appVersion); err != nil || release.ChartDigest(archived) != release.ChartDigest(embedded) {
			t.Errorf("%s is not the chart gpuctl installs for %s (%v)", p.Reference, p.Version, err)
		}
		sum := sha256.Sum256(pulled.Chart.Data)
		got := "sha256:" + hex.EncodeToString(sum[:])
		if got != p.Digest || got != savedDigest[p.Name+" "+p.Version] || pulled.Manifest.Digest != p.Manifest {
			t.Errorf("%s: pulled archive %s (manifest %s), pushed %s (manifest %s), charts save wrote %s",
				p.Reference, got, pulled.Manifest.Digest, p.Digest, p.Manifest, savedDigest[p.Name+" "+p.Version])
		}
	}
}

// startRegistry runs a distribution registry with in-memory storage on loopback until the test ends.
func startRegistry(t *testing.T) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	config := &configuration.Configuration{}
	config.HTTP.Addr = addr
	config.Storage = configuration.Storage{"inmemory": configuration.Parameters{}}
	config.Log.Level = "error"
	reg, err := distribution.NewRegistry(t.Context(), config)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- reg.ListenAndServe() }()
	t.Cleanup(func() {
		_ = reg.Shutdown(t.Context())
		<-done
	})
	return addr
}
