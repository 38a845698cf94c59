package plan

// PSPBindingName is the RoleBinding a KindPSP step applies: it lets the install namespace's service
// accounts use the privileged PodSecurityPolicy of old TKGS clusters.
const PSPBindingName = "gpuctl-psp-privileged"
