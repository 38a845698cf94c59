package wizard

import (
	"context"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// KubeContext is one context of the kubeconfig.
type KubeContext struct {
	Name, Cluster, User, Namespace string
}

// Backend is what the wizard needs of gpuctl's engine, for one kube context at a time. The CLI's
// implementation builds the clients for the context and calls engine.Check and engine.Install.
type Backend interface {
	// Contexts lists the kubeconfig's contexts and names the current one.
	Contexts() (contexts []KubeContext, current string, err error)
	// Check detects, plans with o and runs the preflight checks, changing nothing (engine.Check).
	Check(ctx context.Context, kubeContext string, o engine.InstallOptions) (*engine.CheckResult, error)
	// Install runs engine.Install with o: events go to sink, confirm is called with the Plan before
	// the first write, and getenv supplies secret inputs named by environment variable.
	Install(ctx context.Context, kubeContext string, o engine.InstallOptions, sink event.Sink,
		confirm func(*plan.Plan) bool, getenv func(string) string) (*engine.InstallResult, error)
}
