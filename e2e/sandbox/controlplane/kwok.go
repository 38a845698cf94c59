package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// writeKwokStages concatenates the kwok stages the sandbox uses: nodes become Ready at once and renew
// their leases; pods become Ready at once, Jobs' pods complete, deleted pods go away; GPU workloads
// that run to completion finish, and fail on the broken GPU nodes (gpuworkload.go).
func writeKwokStages(dir, stages string, broken []string) (string, error) {
	var b strings.Builder
	// kwok renews leases and plays node and pod stages with 4 workers each by default
	// (sigs.k8s.io/kwok pkg/apis/config/v1alpha1/kwok_configuration_types.go@v0.8.0). At 2,000 nodes a
	// lease is due every 10 s per node, 200 renewals a second: four workers fall behind as soon as the
	// API server is busy, the node lifecycle controller marks nodes unreachable (as it would a real node
	// whose kubelet stopped renewing), and the operand DaemonSets' pods queue behind four workers.
	// Real kubelets each renew their own lease, in parallel.
	b.WriteString(kwokConfiguration)
	b.WriteString("\n---\n")
	for _, f := range []string{
		"node/fast/node-initialize.yaml",
		"node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
		"pod/fast/pod-ready.yaml",
		"pod/fast/pod-complete.yaml",
		"pod/fast/pod-delete.yaml",
	} {
		data, err := os.ReadFile(filepath.Join(stages, f))
		if err != nil {
			return "", fmt.Errorf("read kwok stage: %w", err)
		}
		b.Write(data)
		b.WriteString("\n---\n")
	}
	b.WriteString(gpuWorkloadStages(broken))
	path := filepath.Join(dir, "kwok-stages.yaml")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

const kwokConfiguration = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  nodeLeaseParallelism: 32
  nodePlayStageParallelism: 16
  podPlayStageParallelism: 16
`
