package kube

import "k8s.io/apimachinery/pkg/runtime/schema"

// OLM's API (operators.coreos.com, packages.operators.coreos.com), as OpenShift serves it: install
// subscribes and approves, uninstall deletes the CSV its Subscription installed.
var (
	SubscriptionsGVR   = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "subscriptions"}
	InstallPlansGVR    = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "installplans"}
	CSVsGVR            = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "clusterserviceversions"}
	PackageManifestGVR = schema.GroupVersionResource{Group: "packages.operators.coreos.com", Version: "v1", Resource: "packagemanifests"}
)
