// Package lock makes gpuctl runs take turns on a cluster: one writer at a time.
//
// The lock is a coordination.k8s.io/v1 Lease, "gpuctl" in kube-system. It is cluster-wide, not per
// operator namespace, because what gpuctl writes is largely cluster-scoped (CRDs, the ClusterPolicy,
// node taints) and two runs with different -n would still collide there; and kube-system exists
// before gpuctl has created anything, so taking the lock is never itself a write that needs a lock.
// The holder (host, pid, command line with --set values left out, since when) is recorded in the
// Lease's holderIdentity and annotations, so a second run can name it. The holder renews the Lease
// while it runs; a Lease that another run has watched go unrenewed for its duration has expired and
// may be taken over (the holder was killed). Expiry is timed on the watching run's own clock, from
// when it last saw the Lease change, as client-go's leader election does: the renewTime the holder
// wrote is never compared with it, so clock skew between hosts does not matter. The price is that a
// run that finds the Lease held cannot tell how old the last renewal is, and waits a whole duration
// from its first look before it takes over.
//
// It does not decide what is safe to change under the lock: internal/release does, given the
// holder's identity (Held.Identity), which it writes on every Helm revision of the run; a pending
// revision that names another run is that run's leftover, since a run writes only while it holds
// the Lease. No clocks are compared for that. The engine takes it for a whole run of every verb that
// writes (install, upgrade, uninstall, taint, untaint, verify; not a dry run): after the run's inputs
// are judged, so a refused input writes nothing, and before detection.
package lock
