package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/gpuctl/gpuctl/charts"
	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/health"
)

// Our charts are ordinary Helm charts: `helm install` of each, from a directory as a person would
// check them out, installs their CRDs from crds/ and the workloads, and the real operator reconciles
// the ClusterPolicy — without gpuctl.
func TestChartsInstallWithPlainHelm(t *testing.T) {
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1}})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	const ns = "nvidia"
	for _, name := range charts.Names() {
		helmInstall(t, c, ns, name, name)
	}
	w := &health.Waiter{Kube: c.Kube, Dynamic: dynamicClient(t, c), Namespace: ns}
	if err := w.ClusterPolicyReady(ctx, "cluster-policy"); err != nil {
		t.Fatalf("after plain helm installs: %v", err)
	}
	if got := c.OperatorNamespace(); got != ns {
		t.Errorf("the operator runs for namespace %q, want %q", got, ns)
	}
}

// helmInstall is `helm install RELEASE ./charts/CHART -n NS --create-namespace`: the chart copied out
// of the binary to a directory, as a person would check it out, installed with Helm's SDK alone.
func helmInstall(t *testing.T, c *sandbox.Cluster, ns, releaseName, chart string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, charts.FS); err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &c.Kubeconfig
	flags.Namespace = &ns
	cfg := action.NewConfiguration()
	if err := cfg.Init(flags, ns, "secret"); err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(filepath.Join(dir, chart))
	if err != nil {
		t.Fatalf("helm cannot load %s from a directory: %v", chart, err)
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = releaseName, ns, true
	in.Timeout = time.Minute
	in.WaitStrategy = kube.HookOnlyStrategy // `helm install` without --wait
	if _, err := in.RunWithContext(t.Context(), ch, nil); err != nil {
		t.Fatalf("helm install %s: %v", releaseName, err)
	}
}
