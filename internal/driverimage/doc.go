// Package driverimage asks an OCI registry which driver images it holds, and names the tag NVIDIA's GPU
// Operator pulls for a node running precompiled drivers.
//
// What it does:
//   - PrecompiledTag and OSTag build the tag the operator pulls for a node's kernel and OS
//     (<driver.version>-<kernel>-<os tag>), as NVIDIA's controller builds it.
//   - Specs reads the driver image settings (repository, image, version, pull secrets, precompiled,
//     nodeSelector) out of a rendered ClusterPolicy or NVIDIADriver; PullSecretConfigs reads the
//     named pull secrets' .dockerconfigjson from the cluster, leaving out the ones not there.
//   - Registry.Tags lists a repository's tags through the OCI distribution API (oras-go), anonymously
//     or with the logins of pull secrets, within a per-request deadline.
//
// What it deliberately does not do:
//   - Pull or inspect images, or judge what the tags mean for an install: package preflight does that.
//
// Package preflight consumes it (the "precompiled-driver" check); package engine constructs the Registry
// and asks it before planning --precompiled auto.
package driverimage
