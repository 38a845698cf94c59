// Package controlplane runs the sandbox's real Kubernetes: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok as child processes on loopback ports, with a
// certificate authority that mints users (NewUser) and the kwok stages that make simulated nodes Ready,
// pods run and GPU workloads finish or fail (kwok.go, gpuworkload.go). Every child is started from one
// locked OS thread (Spawner) so that a killed test binary leaves no orphans. Open it to change a
// server's flags, how the servers are brought up, restarted (RestartAPIServer) or stopped, or what
// kwok plays; it knows nothing of flavours, stand-ins or the GPU operator.
package controlplane
