package distro

import "strings"

// Where is the part of a cluster a Signal looks at. Its value is the signal's name in detection's
// evidence ("label", "version suffix").
type Where string

// The parts of a cluster detection reads (detect.Gather) and a Signal can look at.
const (
	// Label: a node label, by Keys (with Value or EmptyValue) or by Prefixes (less Except).
	// Evidence names the key and its value.
	Label Where = "label"
	// Annotation: a node annotation, by Prefixes. Evidence names the key only: values (node-args)
	// can be long and hold secrets.
	Annotation Where = "annotation"
	// NodeName, Kernel, OSImage, Runtime and ProviderID: the node's name, status.nodeInfo's
	// kernelVersion, osImage and containerRuntimeVersion, and spec.providerID, by Match.
	NodeName   Where = "node name"
	Kernel     Where = "kernel"
	OSImage    Where = "os image"
	Runtime    Where = "container runtime"
	ProviderID Where = "providerID"
	// Version: the API server's version, or else a kubelet's, by Match: managed and packaged
	// distributions stamp their builds.
	Version Where = "version suffix"
	// APIGroup: the API server serves the group Name.
	APIGroup Where = "api group"
	// ClusterVersion: OpenShift's ClusterVersion names a version (the first completed one, else the
	// desired one).
	ClusterVersion Where = "ClusterVersion"
	// ConfigMap: the ConfigMap Name ("namespace/name") exists; detect.Gather reads only those it
	// knows of.
	ConfigMap Where = "ConfigMap"
	// Workload: a Deployment or DaemonSet Name ("namespace/name") exists.
	Workload Where = "workload"
	// ManagedControlPlane: no node is a control-plane node, as with a cloud's managed control plane.
	// It counts only where the distribution's signals before it found something, since it says
	// nothing about which cloud.
	ManagedControlPlane Where = "control plane"
	// Warning: a warning detection gathered (a Forbidden read, an admission refusal) matches Match.
	Warning Where = "policy refusal"
)

// Signal is one thing a distribution shows through the API, with the weight detection gives it.
// Detection adds up a distribution's evidence as independent signals, 1 − ∏(1 − wᵢ/100). Weights,
// roughly: 70–90 for a signal only that distribution produces (its API group, its node labels or
// annotations, its version stamp); 60 and up counts as unique to it; 30–60 for signals it shares
// with a few others (providerID prefixes, OS images, the k3s containerd fork, Rancher API groups);
// 10–20 for weak hints.
type Signal struct {
	// In is where detection looks.
	In Where
	// Weight is the signal's weight, 0–100.
	Weight int
	// Keys (Label): the first of these keys a node carries.
	Keys []string
	// Value (Label, with Keys): the key must have this value; EmptyValue: it must be empty.
	Value      string
	EmptyValue bool
	// Prefixes (Label, Annotation): the first key, in sorted order, that starts with a prefix,
	// prefix by prefix.
	Prefixes []string
	// Except (Label, with Prefixes): keys Prefixes does not count (another signal scores them).
	Except []string
	// Match (NodeName, Kernel, OSImage, Runtime, ProviderID, Version, Warning): the value's test.
	Match Match
	// Name is the API group (APIGroup), or the "namespace/name" of the ConfigMap or Workload.
	Name string
	// GivesVersion: the value is the distribution's version (for a Label, the label's value). The
	// first such signal that is seen gives it; without one, the API server's version is used.
	GivesVersion bool
}

// Match is a test on one string. Every field that is set must hold, and an empty string never
// matches.
type Match struct {
	// Prefix and Suffix: the value starts, ends with it.
	Prefix, Suffix string
	// Contains: the value contains one of them.
	Contains []string
	// Excludes: the value does not contain it.
	Excludes string
	// Is: a shape the fields above cannot say (GKE's node names).
	Is func(string) bool
}

// Matches reports whether s passes the test.
func (m Match) Matches(s string) bool {
	switch {
	case s == "":
		return false
	case m.Prefix != "" && !strings.HasPrefix(s, m.Prefix):
		return false
	case m.Suffix != "" && !strings.HasSuffix(s, m.Suffix):
		return false
	case m.Excludes != "" && strings.Contains(s, m.Excludes):
		return false
	case m.Is != nil && !m.Is(s):
		return false
	}
	if len(m.Contains) == 0 {
		return true
	}
	for _, c := range m.Contains {
		if strings.Contains(s, c) {
			return true
		}
	}
	return false
}

// isOf reports whether s is made only of the characters in set.
func isOf(s, set string) bool {
	for _, r := range s {
		if !strings.ContainsRune(set, r) {
			return false
		}
	}
	return true
}

// Character sets node-name shapes are made of.
const (
	digits     = "0123456789"
	hexDigits  = "0123456789abcdef"
	lowerAlnum = "0123456789abcdefghijklmnopqrstuvwxyz"
)
