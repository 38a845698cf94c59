// Package operator runs NVIDIA's real GPU operator controller in the sandbox. The Follower watches
// for a GPU operator Deployment (whoever installed it: gpuctl, plain Helm, the OLM stand-in) whose pod
// is Running, and runs the controller of the release its image names as a local process in that pod's
// place, with the Deployment's environment and its service account's credentials; it restarts a
// crashed controller with a kubelet-like back-off and stops it when the Deployment goes. Each process
// sees its own release's files at /opt/gpu-operator (view.go). deployment.go is how the sandbox
// recognises and reads the operator's Deployment. Open it when the real controller does not run, runs
// the wrong release, or sees the wrong files; the builds themselves come from package toolchain.
package operator
