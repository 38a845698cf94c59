package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/e2e/crdgen"
	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/e2e/upstream"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
)

var (
	serviceMonitors = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}
	prometheusRules = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}
	prometheuses    = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheuses"}
)

// prometheusOperatorCRDs generates the Prometheus Operator's ServiceMonitor, PodMonitor, PrometheusRule
// and Prometheus CRDs with controller-gen from its Go API types, as vendored in NVIDIA's GPU Operator
// v26.7.0 sources (vendor/github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1,
// which the operator's controller itself uses), with descriptions left out. Nothing is fetched and
// nothing of the Prometheus Operator's is kept in this repository.
func prometheusOperatorCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	tree := upstream.TreeT(t, "v26.7.0")
	var progress bytes.Buffer
	cg, err := crdgen.ControllerGen(t.Context(), &progress)
	if err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, progress.String())
	}
	out := t.TempDir()
	cmd := exec.CommandContext(t.Context(), cg, "crd:maxDescLen=0",
		"paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1", "output:crd:dir="+out)
	cmd.Dir = tree
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=vendor", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen over the Prometheus Operator's types: %v\n%s", err, b)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, plural := range []string{"servicemonitors", "podmonitors", "prometheusrules", "prometheuses"} {
		b, err := os.ReadFile(filepath.Join(out, "monitoring.coreos.com_"+plural+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatal(err)
		}
		crds = append(crds, &crd)
	}
	return crds
}

// TestMonitoring: on one sandbox with NVIDIA's real controller, --monitoring without the Prometheus
// Operator's CRDs warns and installs; with them registered, an upgrade (which keeps the recorded
// --monitoring) makes the operator create the DCGM exporter's and its own ServiceMonitors and installs
// the dashboard and the alerts (through the API server, so validated by the CRDs' schemas); install
// --monitoring again changes nothing; status reports monitoring on and which Prometheus scrapes it;
// uninstall removes the dashboard and the alerts.
func TestMonitoring(t *testing.T) {
	t.Parallel()
	crds := prometheusOperatorCRDs(t)
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 1}})
	ctx := t.Context()
	dyn := dynamicClient(t, c)
	const ns = "gpu-operator"

	story(t,
		step{"without the Prometheus Operator's CRDs --monitoring warns and the install succeeds", func(t *testing.T) {
			res, stderr := installJSON(t, c, "--monitoring")
			if !slices.ContainsFunc(res.Plan.Warnings, func(w string) bool { return strings.Contains(w, "install kube-prometheus-stack first") }) {
				t.Errorf("plan warnings %q, want the hint to install kube-prometheus-stack first", res.Plan.Warnings)
			}
			if !strings.Contains(stderr, "install kube-prometheus-stack first") {
				t.Errorf("the warning is not shown on stderr:\n%s", stderr)
			}
			if res.Plan.Step("release-"+plan.MonitoringRelease) != nil {
				t.Error("the plan installs the dashboard release without the CRDs")
			}
			for _, l := range res.Plan.Step("release-" + plan.OperatorRelease).Release.Layers {
				if l.Source == plan.MonitoringSource {
					t.Errorf("operator values got a --monitoring layer %v without the CRDs", l.Values)
				}
			}
			code, st := statusJSON(t, c, healthyWait()...)
			if code != 0 || st.Monitoring == nil || !st.Monitoring.On || st.Monitoring.Problem == "" {
				t.Errorf("status exit %d, monitoring %+v; want 0, on with a problem named", code, st.Monitoring)
			}
		}},

		step{"with them, upgrade adds what the recorded --monitoring asks for: the operator's ServiceMonitors, the dashboard and the alerts", func(t *testing.T) {
			ext := apiextensionsclient.NewForConfigOrDie(c.Config)
			for _, crd := range crds {
				if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
					t.Fatalf("create CRD %s: %v", crd.Name, err)
				}
				if err := kube.WaitCRDEstablished(ctx, ext, crd.Name); err != nil {
					t.Fatal(err)
				}
			}
			// What docs/monitoring.md tells a user who installed kube-prometheus-stack after gpuctl.
			res := upgradeJSON(t, c, "--yes")
			if res.Install == nil || res.Install.Plan.Step("release-"+plan.MonitoringRelease) == nil {
				t.Fatalf("the upgrade's plan has no %s release", plan.MonitoringRelease)
			}
			if res.Preview == nil || !slices.ContainsFunc(res.Preview.Releases, func(r engine.ReleaseChange) bool {
				return r.Name == plan.MonitoringRelease && r.FromRevison == 0
			}) {
				t.Errorf("the preview does not show %s as a new release: %+v", plan.MonitoringRelease, res.Preview)
			}
			// Created by NVIDIA's controller from the ClusterPolicy, not by gpuctl.
			dcgm := waitForObject(t, c, serviceMonitors, ns, "nvidia-dcgm-exporter")
			op := waitForObject(t, c, serviceMonitors, ns, "gpu-operator")
			for _, sm := range []*unstructured.Unstructured{dcgm, op} {
				if len(sm.GetOwnerReferences()) == 0 || sm.GetOwnerReferences()[0].Kind != "ClusterPolicy" {
					t.Errorf("ServiceMonitor %s is owned by %v, want the ClusterPolicy (the operator made it)", sm.GetName(), sm.GetOwnerReferences())
				}
			}
			cm, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "gpu-monitoring-dashboard", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if cm.Labels["grafana_dashboard"] != "1" {
				t.Errorf("dashboard labels %v, want grafana_dashboard=1", cm.Labels)
			}
			var dashboard map[string]any
			if err := json.Unmarshal([]byte(cm.Data["gpuctl-gpus.json"]), &dashboard); err != nil || dashboard["uid"] != "gpuctl-gpus" {
				t.Errorf("dashboard JSON: %v (uid %v)", err, dashboard["uid"])
			}
			rule, err := dyn.Resource(prometheusRules).Namespace(ns).Get(ctx, "gpu-monitoring", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
			var alerts []string
			for _, g := range groups {
				rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
				for _, r := range rules {
					alerts = append(alerts, r.(map[string]any)["alert"].(string))
				}
			}
			slices.Sort(alerts)
			if want := []string{"GPUFellOffTheBus", "GPUNodeNotValidated", "GPUTemperatureHigh", "GPUXIDError"}; !slices.Equal(alerts, want) {
				t.Errorf("alerts %v, want %v", alerts, want)
			}
			if r := helmRelease(t, c, plan.MonitoringRelease); r.Status != "deployed" {
				t.Errorf("release %s is %s", r.Name, r.Status)
			}
			assertReconciled(t, c, plan.ClusterPolicyName)
		}},

		step{"status says monitoring is on and which Prometheus scrapes it", func(t *testing.T) {
			code, st := statusJSON(t, c, healthyWait()...)
			m := st.Monitoring
			if code != 0 || m == nil || !m.On || !m.Dashboard || m.Problem != "" || m.Scraped != engine.ScrapedUnknown {
				t.Fatalf("exit %d, monitoring %+v; want on, dashboard, no problem, scraped unknown (no Prometheus yet)", code, m)
			}
			if !slices.Contains(m.ServiceMonitors, "nvidia-dcgm-exporter") || !slices.Contains(m.ServiceMonitors, "gpu-operator") {
				t.Errorf("ServiceMonitors %v", m.ServiceMonitors)
			}
			// A Prometheus as kube-prometheus-stack would run it, selecting ServiceMonitors by label in every namespace.
			if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			prom := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus",
				"metadata": map[string]any{"name": "k8s", "namespace": "monitoring"},
				"spec": map[string]any{
					"serviceMonitorSelector":          map[string]any{"matchLabels": map[string]any{"app": "nvidia-dcgm-exporter"}},
					"serviceMonitorNamespaceSelector": map[string]any{},
				},
			}}
			if _, err := dyn.Resource(prometheuses).Namespace("monitoring").Create(ctx, prom, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			_, st = statusJSON(t, c)
			if st.Monitoring == nil || st.Monitoring.Scraped != engine.ScrapedYes || !slices.Equal(st.Monitoring.ScrapedBy, []string{"monitoring/k8s"}) {
				t.Errorf("monitoring %+v, want scraped by monitoring/k8s", st.Monitoring)
			}
		}},

		step{"install --monitoring again changes nothing", func(t *testing.T) {
			again := assertRerunChangesNothing(t, c, nil, "--monitoring")
			if again.Plan.Step("release-"+plan.MonitoringRelease) == nil {
				t.Errorf("the rerun's plan has no %s release", plan.MonitoringRelease)
			}
		}},

		step{"uninstall removes the dashboard and the alerts", func(t *testing.T) {
			code, _, stderr := uninstallJSON(t, c, "--yes")
			if code != 0 {
				t.Fatalf("uninstall exited %d:\n%s", code, stderr)
			}
			if _, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "gpu-monitoring-dashboard", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("dashboard ConfigMap after uninstall: %v", err)
			}
			if _, err := dyn.Resource(prometheusRules).Namespace(ns).Get(ctx, "gpu-monitoring", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("PrometheusRule after uninstall: %v", err)
			}
		}},
	)
}
