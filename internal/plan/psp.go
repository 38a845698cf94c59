package plan

// PSPBindingName is the RoleBinding a KindPSP step applies: it lets the install namespace's service
// accounts use the privileged PodSecurityPolicy of old TKGS clusters.
const PSPBindingName = "gpuctl-psp-privileged"

// PSPBinding is the RoleBinding a KindPSP step applies in namespace ns: VMware's privileged
// PodSecurityPolicy for the namespace's service accounts
// (https://raw.githubusercontent.com/wavefrontHQ/wavefront-collector-for-kubernetes/master/deploy/vsphere-tanzu/0-vsphere-tanzu-rolebinding.yaml).
func PSPBinding(ns string) map[string]any {
	return map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": PSPBindingName, "namespace": ns},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "psp:vmware-system-privileged"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:serviceaccounts:" + ns}},
	}
}
