package detect

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestNVAIESecretsReadsMetadataOnly(t *testing.T) {
	var mu sync.Mutex
	var accepts, selectors []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		accepts = append(accepts, r.Header.Get("Accept"))
		selectors = append(selectors, r.URL.Query().Get("fieldSelector"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("fieldSelector") == "metadata.name=licensing-config" {
			w.Write([]byte(`{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","items":[
				{"metadata":{"name":"licensing-config","namespace":"gpu-operator","labels":{"app.kubernetes.io/managed-by":"gpuctl"}}}]}`))
			return
		}
		w.Write([]byte(`{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","items":[]}`))
	}))
	defer srv.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	g := &gatherer{c: Clients{Kube: kube}, s: &Snapshot{}}
	if err := g.nvaieSecrets(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(g.s.Secrets) != 1 || g.s.Secrets[0] != (SecretRef{Namespace: "gpu-operator", Name: "licensing-config", ManagedBy: "gpuctl"}) {
		t.Errorf("secrets %+v", g.s.Secrets)
	}
	for _, a := range accepts {
		if !strings.Contains(a, "as=PartialObjectMetadataList") {
			t.Errorf("Accept %q: the list could carry Secret data", a)
		}
	}
	if strings.Join(selectors, " ") != "metadata.name=licensing-config metadata.name=ngc-secret" {
		t.Errorf("field selectors %q", selectors)
	}
	e := existing(g.s)
	if !e.HasSecret("gpu-operator", "licensing-config") || e.HasSecret("gpu-operator", "ngc-secret") || e.HasSecret("other", "licensing-config") {
		t.Errorf("HasSecret wrong for %+v", e.Secrets)
	}
}
