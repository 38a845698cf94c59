// Package kube builds gpuctl's Kubernetes clients from kubectl-style flags and does the few direct
// writes gpuctl makes outside Helm: the namespace with its Pod Security labels, platform prerequisite
// objects, and server-side applied CRDs. It also holds the one reading of when an Event happened
// (EventTime), which the waits' diagnosis, verify and the support bundle share.
//
// It deliberately knows nothing about GPUs, charts or plans; the engine calls it with objects the plan
// chose. Reads for detection live in internal/detect, waits in internal/health.
package kube
