// Package olm stands in for OpenShift's Operator Lifecycle Manager on the openshift flavour: it
// resolves Subscriptions against the flavour's PackageManifests (subscription.go), creates and, when
// approved, runs InstallPlans (installplan.go), installs ClusterServiceVersions: the operator's
// Deployment, service account and RBAC, the bundle's CRDs (csv.go), and reports their phases as OLM
// does. It knows the install strategies of the two bundles it installs, NVIDIA's GPU operator and Red
// Hat's NFD operator (bundles.go); what the NFD operator then does is package nfd's. Open it when an
// OpenShift install path behaves differently in the sandbox than OLM would.
package olm
