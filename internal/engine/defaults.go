package engine

import (
	"time"

	"github.com/gpuctl/gpuctl/internal/plan"
)

// Defaults of the verbs' options, declared once: the verbs apply them to a zero option, and the CLI's
// flags and the wizard show them.
const (
	// DefaultInstallTimeout bounds an install (detection to the validators).
	DefaultInstallTimeout = plan.DefaultTimeout
	// DefaultUpgradeTimeout bounds an upgrade: the operator replaces drivers node by node.
	DefaultUpgradeTimeout = 30 * time.Minute
	// DefaultUninstallTimeout bounds an uninstall.
	DefaultUninstallTimeout = 10 * time.Minute
	// DefaultFinalizerWait is how long a deleted object may stay before uninstall names what holds it.
	DefaultFinalizerWait = 2 * time.Minute
	// DefaultVerifyTimeout bounds the wait for verify's workloads.
	DefaultVerifyTimeout = 5 * time.Minute
	// DefaultCheckTimeout bounds `gpuctl check --pre`: detection, the plan, and the checks, registry
	// lookups included.
	DefaultCheckTimeout = 2 * time.Minute
	// DefaultStatusWait bounds `gpuctl status --wait`.
	DefaultStatusWait = 5 * time.Minute
	// DefaultNamespace is where the stack is installed unless told otherwise.
	DefaultNamespace = plan.DefaultNamespace
)
