// Package export turns an install Plan into what a GitOps engine applies: Flux HelmRepository and
// HelmRelease objects, or Argo CD Applications, with exactly the values of the Plan's releases, in the
// Plan's order, after the Plan's plain objects (the namespace, platform prerequisites).
//
// It is pure: it reads the Plan and the embedded charts' CRDs, never a cluster, and never a Secret's
// material. What an engine cannot do (tainting nodes, creating NVAIE Secrets, OpenShift's OLM path)
// it says in Notes rather than drops. It does not publish charts (the engine pulls them from
// Export.ChartRepo). The cli's export command calls it with the Plan engine.Template builds.
package export
