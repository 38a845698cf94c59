package distro

// Distribution is everything gpuctl knows about one Kubernetes distribution. Its zero value is a
// distribution gpuctl does not know: no signals, no profile of its own, no quirks (upstream
// defaults).
type Distribution struct {
	// Name is what detection calls it and the plan and the install record keep ("openshift").
	Name string
	// Title is its full name, as detection describes it ("Red Hat OpenShift").
	Title string
	// Short is its name in messages ("OpenShift", "RKE2", "K3s").
	Short string
	// Profile is the values profile gpuctl installs with on it: profiles/<Profile>.yaml.
	Profile string

	// Signals are what detection scores it by, in the order its evidence lists them.
	Signals []Signal
	// Fallback: detection's answer where no other distribution reaches the minimum confidence
	// (upstream defaults); it is never reported as conflicting with the winner, since other
	// distributions are built with it (kubeadm under TKGS and Cluster API).
	Fallback bool
	// Unsupported is a variant of it the GPU operator does not support (GKE Autopilot), which
	// detection looks for once it has chosen this distribution.
	Unsupported *Variant
	// PoolNotes are what detection notes on its GPU pools.
	PoolNotes []PoolNote

	// Containerd is where its containerd listens and keeps its config, as NVIDIA's container
	// toolkit must be told; nil where the toolkit keeps NVIDIA's defaults or does not run (the EKS
	// and AKS profiles turn it off; OpenShift runs CRI-O).
	Containerd *Containerd

	// OLM: NVIDIA's operator and Node Feature Discovery are installed through the Operator Lifecycle
	// Manager (Red Hat's NFD Operator, then NVIDIA's certified operator), as NVIDIA documents for
	// OpenShift, not as Helm releases: no chart to export, no image layers, no DRA, the upgrade
	// path is OLM's channel graph, and the ClusterPolicy is the CSV's.
	OLM bool
	// NoPrecompiledDriver says why NVIDIA's precompiled driver images do not apply here; "" where
	// they may.
	NoPrecompiledDriver string
	// MIGReboot: MIG manager must reboot a node to change its GPUs' MIG mode (WITH_REBOOT).
	MIGReboot bool
	// DriverInstaller: where neither the platform nor the operator brings the driver, the platform's
	// own driver installer DaemonSet does (Google's, one release per node OS variant).
	DriverInstaller bool
	// RuntimeClass: the distribution registers RuntimeClass nvidia itself and does not make the
	// NVIDIA runtime the default, so GPU pods must name it; the plan warns.
	RuntimeClass bool
	// PrivilegedPSP: older clusters still enforce PodSecurityPolicy, and the plan binds VMware's
	// privileged policy to the install namespace's service accounts (plan.PSPBinding).
	PrivilegedPSP bool
}

// Variant is a form of a distribution that detection tells apart by its own signals.
type Variant struct {
	// Name is what it is called ("GKE Autopilot").
	Name string
	// Signals are what detection scores it by; it is detected at the minimum confidence.
	Signals []Signal
	// Warning is detection's warning when it is detected.
	Warning string
}

// PoolNote is a note detection adds to a GPU pool of the distribution: a documented fact about its
// GPU nodes.
type PoolNote struct {
	// OS limits the note to pools of this node OS, as detection names it ("amzn"); "" any.
	OS string
	// Label and Value: Note when a node of the pool carries Label=Value, Otherwise when none does;
	// without Label, Note always.
	Label, Value string
	// Note and Otherwise are the notes.
	Note, Otherwise string
}

// All returns every distribution gpuctl knows, in detection's order: OpenShift → GKE → EKS → AKS →
// Tanzu → RKE2 → k3s → MicroK8s → k0s → kubeadm (as replicatedhq/troubleshoot
// pkg/analyze/distribution.go orders them). The order breaks ties between equally confident
// candidates. Each call returns a fresh list.
func All() []Distribution {
	return []Distribution{
		openShift(),
		gke(),
		eks(),
		aks(),
		tkgs(),
		rke2(),
		k3s(),
		microK8s(),
		k0s(),
		kubeadm(),
	}
}

// Get returns the distribution named name. A name gpuctl does not know (a record of another
// gpuctl, a hand-built plan, "") gets the zero Distribution: no profile of its own and no quirks.
func Get(name string) Distribution {
	for _, d := range All() {
		if d.Name == name {
			return d
		}
	}
	return Distribution{}
}

// ForProfile returns the distribution whose values profile is name, or the zero Distribution when
// no distribution uses that profile.
func ForProfile(name string) Distribution {
	for _, d := range All() {
		if d.Profile == name {
			return d
		}
	}
	return Distribution{}
}
