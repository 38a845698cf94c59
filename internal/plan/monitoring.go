package plan

import (
	"github.com/Masterminds/semver/v3"

	"github.com/gpuctl/gpuctl/internal/detect"
)

// MonitoringRelease is the release of gpuctl's gpu-monitoring chart: the Grafana dashboard ConfigMap and
// the PrometheusRule that --monitoring adds after the GPU Operator.
const MonitoringRelease = "gpu-monitoring"

// MonitoringSource is the values layer --monitoring adds to the operator release.
const MonitoringSource = "--monitoring"

// monitoring is what --monitoring adds: the operator values that ask NVIDIA's operator for its
// ServiceMonitors, and the gpu-monitoring release; or, where the cluster does not serve the Prometheus
// Operator's API, a warning and nothing. The operator creates the ServiceMonitors itself from the
// ClusterPolicy, and only while servicemonitors.monitoring.coreos.com exists
// (NVIDIA/gpu-operator controllers/object_controls.go, ServiceMonitor(), at v26.7.0).
func monitoring(det *detect.Result, chart ChartInfo, operatorVersion, ns string) (values map[string]any, rel *Release, warning string) {
	switch {
	case det.PrometheusOperator == nil:
		return nil, nil, "--monitoring: skipped, API discovery was refused so gpuctl cannot tell whether the cluster serves monitoring.coreos.com (the Prometheus Operator's ServiceMonitor and PrometheusRule); with permission to read it, run gpuctl upgrade --monitoring"
	case !det.PrometheusOperator.Detected:
		return nil, nil, "--monitoring: skipped, the cluster does not serve monitoring.coreos.com (the Prometheus Operator's ServiceMonitor and PrometheusRule): install kube-prometheus-stack first, then run gpuctl upgrade --monitoring"
	}
	values = map[string]any{}
	// dcgmExporter.serviceMonitor.enabled: every release gpuctl offers knows it (v26.7 defaults it to true,
	// v26.3 and v25.10 to false; deployments/gpu-operator/values.yaml of each).
	set(values, true, "dcgmExporter", "serviceMonitor", "enabled")
	// operator.metrics.serviceMonitor is new in v26.7 (api/nvidia/v1/clusterpolicy_types.go,
	// OperatorMetricsSpec); v26.3 and v25.10 create the operator's ServiceMonitor whenever the CRD exists.
	if since(operatorVersion, "26.7") {
		set(values, true, "operator", "metrics", "serviceMonitor", "enabled")
	}
	vals := map[string]any{}
	rel = &Release{Name: MonitoringRelease, Namespace: ns, Chart: chart.Name, ChartVersion: chart.Version, AppVersion: chart.AppVersion,
		Values: vals, Layers: []Layer{{Source: MonitoringSource, Values: vals}}}
	return normalized(values), rel, ""
}

// since reports whether release version v ("v26.7.0") is minor or newer ("26.7"); an unparsable version
// counts as new (the charts' own release is the newest gpuctl knows).
func since(v, minor string) bool {
	got, err := semver.NewVersion(v)
	if err != nil {
		return true
	}
	c, err := semver.NewConstraint(">= " + minor + ".0-0")
	if err != nil {
		return true
	}
	return c.Check(got)
}
