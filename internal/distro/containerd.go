package distro

// NVIDIA's defaults for the container toolkit's containerd settings, used when toolkit.env does not
// set them (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html).
const (
	DefaultContainerdSocket = "/run/containerd/containerd.sock"
	DefaultContainerdConfig = "/etc/containerd/config.toml"
)

// Containerd is where a distribution's containerd listens and keeps its config, as NVIDIA's
// container toolkit must be told (the distribution's profile sets these values in toolkit.env;
// preflight's toolkit-containerd check judges the values against them).
type Containerd struct {
	// Socket is where its containerd listens (CONTAINERD_SOCKET).
	Socket string
	// Config is the file the toolkit must edit (CONTAINERD_CONFIG); "" leaves NVIDIA's default alone.
	Config string
	// Managed is a directory whose files the distribution writes itself: CONTAINERD_CONFIG must not
	// point into it.
	Managed string
	// FileSourceSince is the containerd major version from which RUNTIME_CONFIG_SOURCE must read the
	// file (`containerd config dump` runs the wrong containerd or returns a config the toolkit cannot
	// round-trip); 0: no such need.
	FileSourceSince int
	// CDISince is the containerd major version its CDI support wants; 0: no such need. CDISource
	// is where that is documented.
	CDISince  int
	CDISource string
	// Source is where the layout is documented.
	Source string
	// Usual: the paths are the usual ones, not fixed by the distribution (kubeadm and GKE nodes may
	// run containerd elsewhere), so a different setting is a warning, not a failure.
	Usual bool
}
