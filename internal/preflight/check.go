package preflight

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// Status is a check's outcome.
type Status string

const (
	// StatusPass: nothing to say.
	StatusPass Status = "pass"
	// StatusWarn: gpuctl goes ahead, but a person should know.
	StatusWarn Status = "warn"
	// StatusFail: gpuctl must not go ahead.
	StatusFail Status = "fail"
	// StatusSkip: the check did not run (skipped by request, does not apply, or an earlier check it
	// depends on failed); Message says which.
	StatusSkip Status = "skip"
)

// Categories, in the order Checks returns them and Render prints them.
const (
	CategoryAPI         = "Kubernetes API"
	CategoryPlan        = "Plan"
	CategoryPermissions = "Permissions"
	CategoryVersions    = "Versions"
	CategoryExisting    = "Existing installs"
	CategoryNodes       = "Nodes"
	CategoryDrivers     = "Drivers"
	CategoryScheduling  = "Scheduling"
)

// Result is one check's outcome.
type Result struct {
	// ID is the check's stable ID ("permissions"); --skip-check takes it.
	ID       string `json:"id"`
	Category string `json:"category"`
	// Description says what the check asserts, as a statement that holds when it passes.
	Description string `json:"description"`
	Status      Status `json:"status"`
	// Message is what was found; it may have several lines.
	Message string `json:"message,omitempty"`
	// Hint is what to do about a warning or failure: a sentence, or a URL.
	Hint string `json:"hint,omitempty"`
}

// Env is everything the checks read.
type Env struct {
	Kube kubernetes.Interface
	// Detection is what detection found; nil if it failed (DetectError says why).
	Detection *detect.Result
	// Plan is the install Plan; nil if it could not be built (PlanError says why).
	Plan *plan.Plan
	// Bundle is the GPU Operator release gpuctl installs, with its tested version ranges.
	Bundle bundle.Bundle
	// Objects are every object the install would write: the Plan's Objects, the CRDs, and the rendered
	// manifests of each release.
	Objects []*unstructured.Unstructured
	// StepNeeds are the reads and writes the Plan's steps make beyond the objects they apply (each step
	// kind says its own: internal/step, Kind.Needs).
	StepNeeds []Access
	// Removed are the objects of the releases' deployed manifests that the new render no longer has:
	// an upgrade's Helm deletes them.
	Removed []*unstructured.Unstructured
	// Mapper maps the Objects' kinds to resources; kinds it does not know (custom resources whose CRD
	// is not installed yet) are mapped through the CRDs among the Objects.
	Mapper meta.RESTMapper
	// Namespace is the namespace gpuctl installs into.
	Namespace string
	// DetectError and PlanError are why Detection or Plan is nil; rendering the releases' manifests
	// counts as part of the plan.
	DetectError error
	PlanError   error
	// ReleaseSizes are the Plan's releases as Helm would store them (EncodedSize).
	ReleaseSizes []ReleaseSize
	// Tags asks the registry the driver image is pulled from for its tags (precompiled drivers); nil
	// skips that check.
	Tags TagLister
}

// Check is one preflight check.
type Check struct {
	ID          string
	Category    string
	Description string
	// Fatal checks stop the run when they fail: the checks after them are reported as skipped.
	Fatal bool
	// Input checks judge the user's inputs, not the cluster: their failure is a usage mistake (exit 2
	// in the CLI), not a failed preflight.
	Input bool
	Run   func(ctx context.Context, env *Env) Result
}

// Checks returns the pre-install checks, in order of category.
func Checks() []Check {
	return []Check{
		{ID: "api", Category: CategoryAPI, Description: "can read the cluster through the Kubernetes API", Fatal: true, Run: checkAPI},
		{ID: "autopilot", Category: CategoryAPI, Description: "the cluster is not GKE Autopilot", Run: checkAutopilot},
		{ID: "plan", Category: CategoryPlan, Description: "gpuctl can plan the install", Run: checkPlan},
		{ID: "release-size", Category: CategoryPlan, Description: "each release fits in Helm's storage", Input: true, Run: checkReleaseSize},
		{ID: "permissions", Category: CategoryPermissions, Description: "you may do everything the install does", Run: checkPermissions},
		{ID: "kubernetes-version", Category: CategoryVersions, Description: "Kubernetes version is in the tested range", Run: checkKubernetesVersion},
		{ID: "openshift-version", Category: CategoryVersions, Description: "OpenShift version is in the tested range", Run: checkOpenShiftVersion},
		{ID: "containerd-version", Category: CategoryVersions, Description: "container runtime is in the tested range", Run: checkContainerdVersion},
		{ID: "existing-operator", Category: CategoryExisting, Description: "no other GPU operator is installed", Run: checkExistingOperator},
		{ID: "existing-clusterpolicy", Category: CategoryExisting, Description: "no other ClusterPolicy is in the way", Run: checkExistingClusterPolicy},
		{ID: "existing-nfd", Category: CategoryExisting, Description: "Node Feature Discovery runs once", Run: checkExistingNFD},
		{ID: "device-plugin", Category: CategoryExisting, Description: "no other NVIDIA device plugin runs on GPU nodes", Run: checkDevicePlugin},
		{ID: "gpu-nodes", Category: CategoryNodes, Description: "GPU nodes were found", Run: checkGPUNodes},
		{ID: "host-driver", Category: CategoryNodes, Description: "GPU drivers come from one place", Run: checkHostDriver},
		{ID: "driver-os", Category: CategoryNodes, Description: "the driver container supports the GPU nodes' OS", Run: checkDriverOS},
		{ID: GPUWorkCheck, Category: CategoryNodes, Description: "the run takes no GPU away from a pod holding it", Run: checkGPUWork},
		{ID: "driver-nodes", Category: CategoryDrivers, Description: "the GPU nodes' kernels, OS images and runtimes", Run: checkDriverNodes},
		{ID: "toolkit-containerd", Category: CategoryDrivers, Description: "the toolkit's containerd settings fit the distribution", Run: checkToolkitContainerd},
		{ID: "precompiled-driver", Category: CategoryDrivers, Description: "a precompiled driver image exists for each GPU node's kernel", Run: checkPrecompiledDriver},
		{ID: "psa", Category: CategoryScheduling, Description: "Pod Security admits the privileged GPU DaemonSets", Run: checkPSA},
		{ID: "taint-safety", Category: CategoryScheduling, Description: "the GPU taint strands nothing gpuctl installs", Run: checkTaintSafety},
		{ID: "gpu-node-taints", Category: CategoryScheduling, Description: "gpuctl's DaemonSets tolerate the GPU nodes' own taints", Run: checkGPUNodeTaints},
	}
}

// pass, warn, fail and skip make a check's Result; the Runner fills ID, Category and Description.
func pass(msg string) Result       { return Result{Status: StatusPass, Message: msg} }
func warn(msg, hint string) Result { return Result{Status: StatusWarn, Message: msg, Hint: hint} }
func fail(msg, hint string) Result { return Result{Status: StatusFail, Message: msg, Hint: hint} }
func skip(msg string) Result       { return Result{Status: StatusSkip, Message: msg} }

// needDetection is the skip result of checks that read the detection when it failed.
func needDetection(env *Env) (Result, bool) {
	if env.Detection == nil {
		return skip("needs the cluster's detection, which failed"), false
	}
	return Result{}, true
}

// needPlan is the skip result of checks that read the Plan when it could not be built.
func needPlan(env *Env) (Result, bool) {
	if env.Plan == nil {
		return skip("needs the install plan, which could not be built"), false
	}
	return Result{}, true
}
