package distro

// TKGS is VMware Tanzu Kubernetes Grid Service's name (vSphere Kubernetes Service, VKS).
const TKGS = "tkgs"

// tkgs: the TKR label, "+vmware." builds, run.tanzu.vmware.com, the guest cluster's cloud
// provider, vsphere:// providerIDs (replicatedhq/troubleshoot pkg/analyze/distribution.go; a vSphere
// 7.0U3 guest cluster). TKGS clusters are built by Cluster API with kubeadm, so kubeadm scores too;
// TKGS wins because kubeadm is the fallback.
func tkgs() Distribution {
	return Distribution{
		Name: TKGS, Title: "VMware Tanzu Kubernetes Grid Service (vSphere Kubernetes Service)", Short: "TKGS", Profile: TKGS,
		Signals: []Signal{
			// The TKR name, e.g. v1.20.8_vmware.1-tkg.2, is the most precise version there is.
			{In: Label, Keys: []string{"run.tanzu.vmware.com/kubernetesDistributionVersion"}, Weight: 80, GivesVersion: true},
			{In: Version, Match: Match{Contains: []string{"+vmware."}}, Weight: 60, GivesVersion: true},
			{In: APIGroup, Name: "run.tanzu.vmware.com", Weight: 50},
			// TKGS guest clusters run vSphere's guest cloud provider here (vSphere 7.0U3).
			{In: Workload, Name: "vmware-system-cloud-provider/guest-cluster-cloud-provider", Weight: 50},
			{In: ProviderID, Match: Match{Prefix: "vsphere://"}, Weight: 20},
		},
		// Older TKGS clusters (Kubernetes < 1.25) enforce PodSecurityPolicy; VMware's practice binds
		// psp:vmware-system-privileged to the namespace's service accounts
		// (https://raw.githubusercontent.com/wavefrontHQ/wavefront-collector-for-kubernetes/master/deploy/vsphere-tanzu/0-vsphere-tanzu-rolebinding.yaml).
		PrivilegedPSP: true,
	}
}
