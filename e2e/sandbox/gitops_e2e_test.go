package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/registry"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
)

var (
	helmRepositoriesGVR = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "helmrepositories"}
	helmChartsGVR       = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "helmcharts"}
	helmReleasesGVR     = schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}
)

// A sandbox with Flux installs a chart the way a GitOps cluster does: a chart pushed to the sandbox's
// OCI registry, a HelmRepository (oci) and a HelmRelease naming it; source-controller fetches the chart,
// helm-controller downloads it from source-controller's artifact server and installs it, and the
// HelmRelease becomes Ready with a real Helm release. Everything helm-controller rendered carries its
// origin labels (helm.toolkit.fluxcd.io/name and /namespace): what tells gpuctl a release is Flux's.
func TestFluxInstallsAChartFromTheSandboxRegistry(t *testing.T) {
	t.Parallel()
	c := StartT(t, Options{Scenario: Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 0}, NoOperator: true, GitOps: GitOpsFlux})
	ctx := t.Context()
	if c.FluxNamespace != "flux-system" || c.RegistryHost == "" {
		t.Fatalf("FluxNamespace %q, RegistryHost %q: want flux-system and a registry", c.FluxNamespace, c.RegistryHost)
	}
	if _, err := c.Kube.CoreV1().Namespaces().Get(ctx, c.FluxNamespace, metav1.GetOptions{}); err != nil {
		t.Fatalf("namespace %s: %v", c.FluxNamespace, err)
	}

	const (
		ns      = "default"
		name    = "tiny"
		version = "0.1.0"
	)
	pushChart(t, c.RegistryHost, "charts/"+name, version, tinyChart(t, name, version))

	dyn := dynamic.NewForConfigOrDie(c.Config)
	repo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
		"metadata": map[string]any{"name": "sandbox", "namespace": ns},
		// insecure: the sandbox's registry speaks plain HTTP.
		"spec": map[string]any{"type": "oci", "url": "oci://" + c.RegistryHost + "/charts", "insecure": true, "interval": "1m"},
	}}
	hr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"interval": "1m",
			"chart": map[string]any{"spec": map[string]any{
				"chart": name, "version": version,
				"sourceRef": map[string]any{"kind": "HelmRepository", "name": "sandbox"},
			}},
		},
	}}
	for gvr, obj := range map[schema.GroupVersionResource]*unstructured.Unstructured{helmRepositoriesGVR: repo, helmReleasesGVR: hr} {
		if _, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", obj.GetKind(), err)
		}
	}
	applied := time.Now()

	var last *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(helmReleasesGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = got
		return conditionTrue(got, "Ready"), nil
	})
	if err != nil {
		t.Fatalf("HelmRelease %s/%s not Ready: %v\nstatus: %v", ns, name, err, statusOf(last))
	}
	t.Logf("HelmRelease Ready %s after it was applied; finalizers %v, status %v", time.Since(applied).Round(100*time.Millisecond), last.GetFinalizers(), statusOf(last))

	t.Run("the Helm release exists, deployed, with the pushed chart", func(t *testing.T) {
		// helm-controller's release name is the HelmRelease's name, stored in its namespace
		// (HelmRelease.GetReleaseName, GetStorageNamespace in helm-controller/api v1.4.0).
		rels, err := driver.NewSecrets(c.Kube.CoreV1().Secrets(ns)).Query(map[string]string{"name": name, "owner": "helm"})
		if err != nil {
			t.Fatalf("query release %s: %v", name, err)
		}
		if len(rels) != 1 {
			t.Fatalf("%d revisions of release %s, want 1", len(rels), name)
		}
		rel, ok := rels[0].(*rspb.Release)
		if !ok {
			t.Fatalf("release is a %T", rels[0])
		}
		if rel.Info.Status != "deployed" || rel.Chart.Metadata.Version != version {
			t.Errorf("release %s: status %s, chart %s, want deployed, %s", name, rel.Info.Status, rel.Chart.Metadata.Version, version)
		}
		t.Logf("release %s: labels %v, description %q", rel.Name, rel.Labels, rel.Info.Description)
		// The manifest Helm stores is the post-rendered one: Flux's labels are in it too.
		if !strings.Contains(rel.Manifest, "helm.toolkit.fluxcd.io/name: "+name) {
			t.Errorf("the stored manifest lacks helm-controller's origin label:\n%s", rel.Manifest)
		}
		secrets, err := c.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
		if err != nil || len(secrets.Items) != 1 {
			t.Fatalf("release secrets: %v, %d", err, len(secrets.Items))
		}
		t.Logf("release secret %s: labels %v, annotations %v", secrets.Items[0].Name, secrets.Items[0].Labels, secrets.Items[0].Annotations)
	})

	t.Run("what helm-controller rendered carries its origin labels", func(t *testing.T) {
		cm, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name+"-settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("ConfigMap %s: labels %v, annotations %v", cm.Name, cm.Labels, cm.Annotations)
		want := map[string]string{
			"helm.toolkit.fluxcd.io/name":      name,
			"helm.toolkit.fluxcd.io/namespace": ns,
			"app.kubernetes.io/managed-by":     "Helm",
		}
		for k, v := range want {
			if cm.Labels[k] != v {
				t.Errorf("ConfigMap label %s=%q, want %q", k, cm.Labels[k], v)
			}
		}
		if cm.Annotations["meta.helm.sh/release-name"] != name || cm.Annotations["meta.helm.sh/release-namespace"] != ns {
			t.Errorf("ConfigMap annotations %v, want Helm's release name and namespace", cm.Annotations)
		}
		if cm.Data["greeting"] != "hello from "+name {
			t.Errorf("ConfigMap data %v: the chart's template was not rendered", cm.Data)
		}
	})

	t.Run("the HelmChart helm-controller made for it carries the same labels", func(t *testing.T) {
		// helm-controller names the HelmChart <namespace>-<name> in the source's namespace.
		hc, err := dyn.Resource(helmChartsGVR).Namespace(ns).Get(ctx, ns+"-"+name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("HelmChart %s: labels %v", hc.GetName(), hc.GetLabels())
		if l := hc.GetLabels(); l["helm.toolkit.fluxcd.io/name"] != name || l["helm.toolkit.fluxcd.io/namespace"] != ns {
			t.Errorf("HelmChart labels %v, want helm-controller's origin labels", l)
		}
	})

	t.Run("the registry serves the pushed chart", func(t *testing.T) {
		resp, err := http.Get("http://" + c.RegistryHost + "/v2/charts/" + name + "/tags/list")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("tags of charts/%s: %s", name, resp.Status)
		}
	})
}

// A registry alone (no GitOps controller): charts push to it and pull back, and Flux is not run.
func TestRegistryAloneServesCharts(t *testing.T) {
	t.Parallel()
	c := StartT(t, Options{Scenario: Scenario{Distro: "gke", GPUNodes: 1, CPUNodes: 0}, NoOperator: true, Registry: true})
	if c.RegistryHost == "" || c.FluxNamespace != "" {
		t.Fatalf("RegistryHost %q, FluxNamespace %q: want a registry and no Flux", c.RegistryHost, c.FluxNamespace)
	}
	if _, err := c.Kube.CoreV1().Namespaces().Get(t.Context(), "flux-system", metav1.GetOptions{}); err == nil {
		t.Error("namespace flux-system exists without Flux")
	}
	archive := tinyChart(t, "tiny", "0.2.0")
	pushChart(t, c.RegistryHost, "charts/tiny", "0.2.0", archive)
	client, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "config.json")))
	if err != nil {
		t.Fatal(err)
	}
	got, err := client.Pull(c.RegistryHost + "/charts/tiny:0.2.0")
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	if !bytes.Equal(got.Chart.Data, archive) {
		t.Errorf("pulled %d bytes, pushed %d: not the same archive", len(got.Chart.Data), len(archive))
	}
}

// tinyChart packages a chart with one ConfigMap and returns the archive.
func tinyChart(t *testing.T, name, version string) []byte {
	t.Helper()
	ch := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: name, Version: version, Type: "application"},
		Templates: []*common.File{{Name: "templates/configmap.yaml", Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  greeting: hello from {{ .Release.Name }}
`)}},
	}
	path, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatalf("package chart: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pushChart pushes a chart archive of version to oci://host/repo:version over plain HTTP.
func pushChart(t *testing.T, host, repo, version string, archive []byte) {
	t.Helper()
	client, err := registry.NewClient(registry.ClientOptPlainHTTP(),
		registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "config.json")),
		registry.ClientOptWriter(testWriter{t}))
	if err != nil {
		t.Fatal(err)
	}
	ref := fmt.Sprintf("%s/%s:%s", host, repo, version)
	if _, err := client.Push(archive, ref); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

func conditionTrue(obj *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return m["status"] == string(corev1.ConditionTrue)
		}
	}
	return false
}

func statusOf(obj *unstructured.Unstructured) any {
	if obj == nil {
		return nil
	}
	return obj.Object["status"]
}
