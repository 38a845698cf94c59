// Package olm stands in for OpenShift's Operator Lifecycle Manager on the openshift flavour: it
// resolves Subscriptions against the flavour's PackageManifests, creates and (when approved) runs
// InstallPlans, installs ClusterServiceVersions (the operator's Deployment, service account and RBAC,
// the bundle's CRDs) and reports their phases as OLM does; it also plays Red Hat's NFD Operator for
// NodeFeatureDiscovery resources. Open it when an OpenShift install path behaves differently in the
// sandbox than OLM would.
package olm
