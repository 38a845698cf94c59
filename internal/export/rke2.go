package export

import (
	"fmt"
	"strings"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/internal/plan"
)

// RKE2's and k3s's helm-controller (github.com/k3s-io/helm-controller, HelmChart API helm.cattle.io/v1
// at v0.17.9) installs a HelmChart found in its system namespace by running `helm install|upgrade` in a
// Job, with the HelmChart's name as the release name (https://docs.rke2.io/helm, https://docs.k3s.io/helm).
const (
	rke2API             = "helm.cattle.io/v1"
	rke2SystemNamespace = "kube-system"
	// rke2FailurePolicy: the default, reinstall, uninstalls a release whose upgrade failed and
	// installs it again; for the operator that deletes its ClusterPolicy and with it the driver of
	// every GPU node. retry tries the upgrade again when the HelmChart changes (a fixed re-export).
	rke2FailurePolicy = "retry"
)

// rke2 writes a HelmChart per release, in kube-system, after the plain objects and the CRDs.
func (e *Export) rke2(r *Result, p *plan.Plan, releases []*plan.Release) error {
	r.Header = []string{
		"gpuctl export --for rke2: the GPU stack gpuctl would install (profile " + p.Profile + ", distribution " + p.Distribution + ") into namespace " + p.Namespace + ".",
		"Charts from " + e.ChartRepo + ": " + chartList(releases) + ".",
		"Put the files in /var/lib/rancher/rke2/server/manifests/ (k3s: /var/lib/rancher/k3s/server/manifests/) on a server node, or kubectl apply -f them",
		"in order (https://docs.rke2.io/helm): the plain objects and the CRDs first, then one helm.cattle.io/v1 HelmChart per release in kube-system.",
		"HelmChart has no dependency between charts: the helm-controller installs each in its own Job, so NFD and the operator start side by side;",
		"the operator deploys its operands only on nodes NFD has labelled, so the order gpuctl keeps is reached once NFD is up.",
		"The CRDs are plain manifests because Helm never upgrades a chart's crds/ (NVIDIA/gpu-operator#602, #139).",
	}
	for _, rel := range releases {
		values, err := sigsyaml.Marshal(rel.Values)
		if err != nil {
			return fmt.Errorf("values of %s: %w", rel.Name, err)
		}
		content := "# values gpuctl would install, from (lowest precedence first): " + strings.Join(layerNames(rel), "; ") + "\n" + string(values)
		spec := map[string]any{
			"targetNamespace": rel.Namespace,
			// The namespace, with its Pod Security labels, is the export's first object; a Job that
			// runs before it exists fails and is retried.
			"createNamespace": false,
			"version":         rel.ChartVersion,
			"failurePolicy":   rke2FailurePolicy,
			"valuesContent":   content,
		}
		if e.oci() {
			spec["chart"] = strings.TrimSuffix(e.ChartRepo, "/") + "/" + rel.Chart
			if e.PlainHTTP {
				// k3s-io/helm-controller pkg/apis/helm.cattle.io/v1/types.go@v0.17.9: PlainHTTP.
				spec["plainHTTP"] = true
			}
		} else {
			spec["chart"], spec["repo"] = rel.Chart, e.ChartRepo
		}
		r.Documents = append(r.Documents, Document{File: "helmchart-" + rel.Name,
			Comment: []string{"Helm release " + rel.Name + " in " + rel.Namespace + ": chart " + rel.Chart + " " + rel.ChartVersion + " (the HelmChart's name is the release's)"},
			Object: map[string]any{"apiVersion": rke2API, "kind": "HelmChart",
				"metadata": map[string]any{"name": rel.Name, "namespace": rke2SystemNamespace},
				"spec":     spec}})
	}
	return nil
}
