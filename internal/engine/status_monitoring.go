package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
)

// The ServiceMonitors NVIDIA's operator creates in its namespace from the ClusterPolicy
// (NVIDIA/gpu-operator assets/state-dcgm-exporter/0500_service_monitor.yaml and
// assets/state-operator-metrics/0300_service_monitor.yaml at v26.7.0).
const (
	dcgmServiceMonitor     = "nvidia-dcgm-exporter"
	operatorServiceMonitor = "gpu-operator"
)

// The Prometheus Operator's resources (prometheus-operator/prometheus-operator pkg/apis/monitoring/v1).
var (
	serviceMonitorsGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}
	prometheusesGVR    = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheuses"}
)

// Scraped verdicts of MonitoringStatus.
const (
	ScrapedYes     = "yes"
	ScrapedNo      = "no"
	ScrapedUnknown = "unknown"
)

// MonitoringStatus is what status found of --monitoring.
type MonitoringStatus struct {
	// On is the install record's --monitoring.
	On bool `json:"on"`
	// ServiceMonitors are the operator's ServiceMonitors found in its namespace.
	ServiceMonitors []string `json:"serviceMonitors,omitempty"`
	// Dashboard is true when the gpu-monitoring release (dashboard and alerts) is deployed.
	Dashboard bool `json:"dashboard"`
	// Scraped is yes when a Prometheus object of the Prometheus Operator selects the DCGM exporter's
	// ServiceMonitor (its labels and namespace), no when Prometheus objects exist and none does, and
	// unknown when there is none or they cannot be read. ScrapedBy names the ones that select it.
	Scraped   string   `json:"scraped"`
	ScrapedBy []string `json:"scrapedBy,omitempty"`
	// Problem says what is missing, when something is ("" when all is well or monitoring is off).
	Problem string `json:"problem,omitempty"`
}

// prometheusRef is a Prometheus object's selectors, nil where the field is absent.
type prometheusRef struct {
	name              string // namespace/name
	namespace         string
	monitorSelector   *metav1.LabelSelector
	namespaceSelector *metav1.LabelSelector
}

// readMonitoring reads what the monitoring check needs: the operator's ServiceMonitors, the
// gpu-monitoring release and the Prometheus objects. Reads the caller may not do, or of an API the
// cluster no longer serves, make the answer less certain rather than failing status.
func (s *Status) readMonitoring(ctx context.Context, rec *record.Record, ns string) *MonitoringStatus {
	m := &MonitoringStatus{On: rec != nil && rec.Inputs.Monitoring, Scraped: ScrapedUnknown}
	if !m.On {
		return m
	}
	sms, err := s.Clients.Dynamic.Resource(serviceMonitorsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	switch {
	case err == nil:
	case kube.Absent(err):
		m.Problem = "the cluster no longer serves monitoring.coreos.com (the Prometheus Operator's CRDs)"
		return m
	default:
		m.Problem = fmt.Sprintf("cannot list ServiceMonitors in %s: %v", ns, err)
		return m
	}
	var dcgm *unstructured.Unstructured
	for i := range sms.Items {
		m.ServiceMonitors = append(m.ServiceMonitors, sms.Items[i].GetName())
		if sms.Items[i].GetName() == dcgmServiceMonitor {
			dcgm = &sms.Items[i]
		}
	}
	slices.Sort(m.ServiceMonitors)
	if rc, err := release.New(s.Clients.Getter, ns, nil); err == nil {
		if last, _ := rc.Last(plan.MonitoringRelease); last != nil && last.Status == "deployed" {
			m.Dashboard = true
		}
	}
	var nsLabels map[string]string
	if n, err := s.Clients.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
		nsLabels = n.Labels
	}
	var proms []prometheusRef
	list, err := s.Clients.Dynamic.Resource(prometheusesGVR).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, p := range list.Items {
			proms = append(proms, prometheusFrom(p))
		}
	}
	evaluateMonitoring(m, dcgm, ns, nsLabels, proms, err == nil)
	return m
}

// prometheusFrom reads a Prometheus object's ServiceMonitor selectors.
func prometheusFrom(p unstructured.Unstructured) prometheusRef {
	ref := prometheusRef{name: p.GetNamespace() + "/" + p.GetName(), namespace: p.GetNamespace()}
	sel := func(field string) *metav1.LabelSelector {
		raw, found, _ := unstructured.NestedMap(p.Object, "spec", field)
		if !found || raw == nil {
			return nil
		}
		var ls metav1.LabelSelector
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
			// A selector gpuctl cannot read selects nothing it can vouch for.
			return &metav1.LabelSelector{MatchLabels: map[string]string{"gpuctl.io/unreadable-selector": "true"}}
		}
		return &ls
	}
	ref.monitorSelector = sel("serviceMonitorSelector")
	ref.namespaceSelector = sel("serviceMonitorNamespaceSelector")
	return ref
}

// evaluateMonitoring fills the ServiceMonitor and scrape verdicts. The Prometheus Operator's selector
// rules (Prometheus spec, prometheus-operator Documentation/api-reference/api.md): a null
// serviceMonitorSelector selects no ServiceMonitor and an empty one all; a null
// serviceMonitorNamespaceSelector selects the Prometheus object's own namespace only, an empty one all.
func evaluateMonitoring(m *MonitoringStatus, dcgm *unstructured.Unstructured, ns string, nsLabels map[string]string, proms []prometheusRef, promsRead bool) {
	var missing []string
	for _, want := range []string{dcgmServiceMonitor, operatorServiceMonitor} {
		if !slices.Contains(m.ServiceMonitors, want) {
			missing = append(missing, want)
		}
	}
	var problems []string
	if len(missing) > 0 {
		problems = append(problems, "ServiceMonitor "+strings.Join(missing, ", ")+" not found in "+ns)
	}
	if !m.Dashboard {
		problems = append(problems, "the "+plan.MonitoringRelease+" release (dashboard and alerts) is not deployed")
	}
	m.Problem = strings.Join(problems, "; ")
	if dcgm == nil || !promsRead || len(proms) == 0 {
		m.Scraped = ScrapedUnknown
		return
	}
	for _, p := range proms {
		if p.selects(dcgm, ns, nsLabels) {
			m.ScrapedBy = append(m.ScrapedBy, p.name)
		}
	}
	m.Scraped = ScrapedNo
	if len(m.ScrapedBy) > 0 {
		m.Scraped = ScrapedYes
	}
}

// selects is true when the Prometheus object p selects the ServiceMonitor sm in namespace ns (whose
// labels are nsLabels), by the rules evaluateMonitoring cites.
func (p prometheusRef) selects(sm *unstructured.Unstructured, ns string, nsLabels map[string]string) bool {
	if p.monitorSelector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(p.monitorSelector)
	if err != nil || !sel.Matches(labels.Set(sm.GetLabels())) {
		return false
	}
	if p.namespaceSelector == nil {
		return p.namespace == ns
	}
	nsSel, err := metav1.LabelSelectorAsSelector(p.namespaceSelector)
	return err == nil && nsSel.Matches(labels.Set(withNameLabel(nsLabels, ns)))
}

// withNameLabel adds kubernetes.io/metadata.name, which the API server sets on every namespace.
func withNameLabel(l map[string]string, ns string) map[string]string {
	out := map[string]string{corev1.LabelMetadataName: ns}
	for k, v := range l {
		out[k] = v
	}
	return out
}

// monitoringCheck is the status check of --monitoring.
func monitoringCheck(m *MonitoringStatus, ns string) StatusCheck {
	c := StatusCheck{Name: "monitoring", State: CheckOK}
	switch {
	case m == nil || !m.On:
		// An OK check shows no hint, so the way to turn it on is in the message.
		c.Message = "off (gpuctl upgrade --monitoring adds ServiceMonitors, a Grafana dashboard and GPU alerts where kube-prometheus-stack runs)"
		return c
	case m.Problem != "":
		c.State = CheckWarning
		c.Message = "on, but " + m.Problem
		c.Hint = "kubectl -n " + ns + " get servicemonitors,prometheusrules; the operator creates its ServiceMonitors only while the monitoring.coreos.com CRDs exist"
		return c
	}
	c.Message = "on: ServiceMonitors " + strings.Join(m.ServiceMonitors, ", ") + ", dashboard and alerts deployed"
	switch m.Scraped {
	case ScrapedYes:
		c.Message += "; scraped by Prometheus " + strings.Join(m.ScrapedBy, ", ")
	case ScrapedNo:
		c.State = CheckWarning
		c.Message += "; no Prometheus selects ServiceMonitor " + dcgmServiceMonitor
		c.Hint = "add the label your Prometheus's serviceMonitorSelector asks for, e.g. gpuctl upgrade --set dcgmExporter.serviceMonitor.additionalLabels.release=kube-prometheus-stack"
	default:
		c.Message += "; whether Prometheus scrapes them is unknown (no Prometheus object gpuctl can read)"
	}
	return c
}
