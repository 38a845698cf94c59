// Package e2e holds gpuctl's end-to-end tests: the real command line, in-process, against sandbox
// clusters (package e2e/sandbox) with the real NVIDIA GPU operator controller. They skip in -short mode.
package e2e
