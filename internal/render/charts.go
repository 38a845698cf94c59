package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/charts"
	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/release"
)

// LoadChart loads one of the embedded charts for an upstream release (appVersion; "" = the chart's
// own): the gpu-operator chart carries the templates and CRDs of every operator release gpuctl offers.
func LoadChart(name, appVersion string) (*chart.Chart, error) {
	ch, err := release.LoadChartRelease(charts.FS, name, appVersion)
	if err != nil || name != plan.OperatorRelease || appVersion == "" {
		return ch, err
	}
	// Chart.yaml's kubeVersion is the default release's floor; an older release supports older
	// Kubernetes (GPU Operator v25.10.x: 1.30 and newer).
	b, err := bundle.Get(appVersion)
	if err != nil {
		return nil, err
	}
	ch.Metadata.KubeVersion = ">= " + b.KubernetesMinimum + ".0-0"
	return ch, nil
}

// ChartInfos describes the embedded charts for the plan, the gpu-operator chart loaded for the
// operator release operatorVersion.
func ChartInfos(operatorVersion string) (map[string]plan.ChartInfo, error) {
	out := map[string]plan.ChartInfo{}
	for _, name := range append(charts.Names(), charts.Optional()...) {
		v := ""
		if name == plan.OperatorRelease {
			v = operatorVersion
		}
		ch, err := LoadChart(name, v)
		if err != nil {
			return nil, err
		}
		out[name] = plan.ChartInfo{Name: ch.Metadata.Name, Version: ch.Metadata.Version, AppVersion: ch.Metadata.AppVersion}
	}
	return out, nil
}

// ChartCRDs decodes the CRDs in a chart's crds/ directory for an upstream release (appVersion; "" = the
// chart's own), and returns the release, which stamps them (kube.CRDVersionAnnotation).
func ChartCRDs(name, appVersion string) ([]*apiextensionsv1.CustomResourceDefinition, string, error) {
	ch, err := LoadChart(name, appVersion)
	if err != nil {
		return nil, "", err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range ch.CRDObjects() {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(f.File.Data), 4096)
		for {
			var crd apiextensionsv1.CustomResourceDefinition
			err := dec.Decode(&crd)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, "", fmt.Errorf("chart %s: %s: %w", name, f.Filename, err)
			}
			if crd.Name == "" {
				continue
			}
			out = append(out, &crd)
		}
	}
	return out, ch.Metadata.AppVersion, nil
}

// OperatorReleaseCRDs are the CRDs of every operator release gpuctl offers, by version, so that a CRD
// another tool installed can be recognised as a newer release's and kept (kube.ApplyCRDs.Releases).
func OperatorReleaseCRDs() (map[string][]*apiextensionsv1.CustomResourceDefinition, error) {
	out := map[string][]*apiextensionsv1.CustomResourceDefinition{}
	for _, b := range bundle.List() {
		crds, _, err := ChartCRDs(plan.OperatorRelease, b.Version)
		if err != nil {
			return nil, err
		}
		out[b.Version] = crds
	}
	return out, nil
}

func YAMLDoc(obj map[string]any) (string, error) {
	b, err := sigsyaml.Marshal(obj)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// ChartDefaults are the default values of an embedded chart as loaded for an upstream release
// (appVersion; "" = the chart's own): what a front end compares a Plan's values with to show only
// what differs.
func ChartDefaults(name, appVersion string) (map[string]any, error) {
	ch, err := LoadChart(name, appVersion)
	if err != nil {
		return nil, err
	}
	return ch.Values, nil
}
