package distro

// K0s is k0s's name.
const K0s = "k0s"

// k0s: its role label, and its version stamp: "v1.33.2+k0s" today, "v1.20.2-k0s1" before
// (https://docs.k0sproject.io/stable/worker-node-config/, https://docs.k0sproject.io/v1.23.1+k0s.0/worker-node-config/).
func k0s() Distribution {
	return Distribution{
		Name: K0s, Title: "k0s", Short: "k0s", Profile: K0s,
		Signals: []Signal{
			{In: Label, Keys: []string{"node.k0sproject.io/role"}, Weight: 80},
			{In: Version, Match: Match{Contains: []string{"+k0s", "-k0s"}}, Weight: 70, GivesVersion: true},
		},
		// k0s merges files of containerd.d into the containerd.toml it generates; its statically linked
		// containerd is not the one `containerd config dump` runs.
		Containerd: &Containerd{
			Socket: "/run/k0s/containerd.sock", Config: "/etc/k0s/containerd.d/nvidia.toml",
			FileSourceSince: 1, Source: "NVIDIA/gpu-operator#1323; k0sproject/k0s#6547",
		},
	}
}
