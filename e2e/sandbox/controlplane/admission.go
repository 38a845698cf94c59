package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
)

// writeCriticalPodQuotaConfig limits pods of the system-node-critical and system-cluster-critical
// priority classes to namespaces with a ResourceQuota that covers them, as GKE's API server does.
// That is why NVIDIA's GKE instructions create a ResourceQuota in the operator's namespace
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html); with this config the sandbox rejects operand pods when gpuctl forgets it.
func writeCriticalPodQuotaConfig(dir string) (string, error) {
	const quota = `apiVersion: apiserver.config.k8s.io/v1
kind: ResourceQuotaConfiguration
limitedResources:
- resource: pods
  matchScopes:
  - scopeName: PriorityClass
    operator: In
    values: ["system-node-critical", "system-cluster-critical"]
`
	quotaPath := filepath.Join(dir, "resource-quota-config.yaml")
	admission := fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ResourceQuota
  path: %s
`, quotaPath)
	admissionPath := filepath.Join(dir, "admission-config.yaml")
	if err := os.WriteFile(quotaPath, []byte(quota), 0o644); err != nil {
		return "", err
	}
	return admissionPath, os.WriteFile(admissionPath, []byte(admission), 0o644)
}
