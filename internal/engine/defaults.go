package engine

import (
	"time"
)

// Defaults of the verbs' own options, each declared here and nowhere else: the verbs apply them to a
// zero option, and the CLI's flags and the wizard show them.
//
// Not here: the install plan's namespace and timeout, which plan.Build applies to plan.Options and so
// declares (plan.DefaultNamespace, plan.DefaultTimeout); and the internal defaults of the packages
// below the engine, each beside the code that applies it (the lock's Lease, kube's request timeout,
// support's log caps and call timeout, driverimage's registry timeout, fleet's parallelism).
const (
	// DefaultUpgradeTimeout bounds an upgrade: the operator replaces drivers node by node.
	DefaultUpgradeTimeout = 30 * time.Minute
	// DefaultUninstallTimeout bounds an uninstall.
	DefaultUninstallTimeout = 10 * time.Minute
	// DefaultFinalizerWait is how long a deleted object may stay before uninstall names what holds it.
	DefaultFinalizerWait = 2 * time.Minute
	// DefaultVerifyTimeout bounds the wait for verify's workloads.
	DefaultVerifyTimeout = 5 * time.Minute
	// DefaultVerifyLogLines is how many of a failed verify pod's last log lines its verdict keeps.
	DefaultVerifyLogLines = 20
	// DefaultCheckTimeout bounds `gpuctl check --pre`: detection, the plan, and the checks, registry
	// lookups included.
	DefaultCheckTimeout = 2 * time.Minute
	// DefaultStatusWait bounds `gpuctl status --wait`.
	DefaultStatusWait = 5 * time.Minute
	// DefaultSupportTimeout bounds a whole `gpuctl diagnose` run.
	DefaultSupportTimeout = 2 * time.Minute
)

// DefaultVerifyImage is the CUDA vectorAdd sample NVIDIA's GPU Operator guide runs to check that a GPU
// workload runs ("Running Sample GPU Applications",
// https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html).
const DefaultVerifyImage = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
