// Package operator is what the sandbox knows of NVIDIA's GPU operator Deployment: how it recognises one
// (IsGPUOperatorDeployment), which container is the operator's, which release its image names, and the
// environment its controller gets. The follower that runs the real controller for such a Deployment
// (operator.go, operator_view.go in the parent package) uses it, and so do the stand-ins' tests.
package operator
