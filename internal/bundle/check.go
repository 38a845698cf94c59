package bundle

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// The statuses of a Verdict.
const (
	// Supported: NVIDIA tested this release on the version (or supports it with the caveat the
	// message gives).
	Supported = "supported"
	// Newer: the version is above the tested range. It will probably work; warn.
	Newer = "newer"
	// Older: the version is below what the release supports. Fail.
	Older = "older"
	// Unknown: the version could not be read, or the runtime is not one NVIDIA names.
	Unknown = "unknown"
)

// Verdict is how a platform version stands against a bundle's tested ranges.
type Verdict struct {
	// Status is Supported, Newer, Older or Unknown.
	Status string
	// Message says what was compared with what and, when it is not supported, what to do.
	Message string
}

// CheckKubernetes judges a Kubernetes version as the API server or a node reports it ("v1.33.4",
// "v1.33.4-gke.1172000", "v1.31.5+k3s1", "v1.33.6+vmware.1-fips-vkr.2"). Only major.minor counts:
// NVIDIA's support matrix lists minors.
func (b Bundle) CheckKubernetes(version string) Verdict {
	got, err := minorOf(version)
	if err != nil {
		return Verdict{Unknown, fmt.Sprintf("cannot read Kubernetes version %q: %v", version, err)}
	}
	return b.judge(platform{
		name:     "Kubernetes",
		tested:   func(c Bundle) string { return c.Kubernetes },
		minimum:  b.KubernetesMinimum,
		caveat:   b.belowRange,
		whatNext: "upgrade the cluster",
	}, got)
}

// CheckOpenShift judges an OpenShift version ("4.19.9", or ClusterVersion's "v4.19.9").
func (b Bundle) CheckOpenShift(version string) Verdict {
	got, err := minorOf(version)
	if err != nil {
		return Verdict{Unknown, fmt.Sprintf("cannot read OpenShift version %q: %v", version, err)}
	}
	return b.judge(platform{
		name:     "OpenShift",
		tested:   func(c Bundle) string { return c.OpenShift },
		whatNext: "upgrade OpenShift",
	}, got)
}

// CheckContainerd judges a node's container runtime as the kubelet reports it in
// status.nodeInfo.containerRuntimeVersion: "containerd://2.1.4-k3s1", "cri-o://1.31.4",
// "docker://28.1.1". A bare version ("2.1.4") is taken as containerd's.
func (b Bundle) CheckContainerd(runtimeVersion string) Verdict {
	runtime, version, found := strings.Cut(strings.TrimSpace(runtimeVersion), "://")
	if !found {
		runtime, version = "containerd", runtimeVersion
	}
	switch runtime {
	case "containerd":
		got, err := minorOf(version)
		if err != nil {
			return Verdict{Unknown, fmt.Sprintf("cannot read containerd version %q: %v", runtimeVersion, err)}
		}
		return b.judge(platform{
			name:     "containerd",
			tested:   func(c Bundle) string { return c.Containerd },
			whatNext: "upgrade containerd on the nodes",
		}, got)
	case "cri-o":
		return Verdict{Supported, fmt.Sprintf(
			"CRI-O is supported by GPU Operator %s on OpenShift, which ships it; elsewhere NVIDIA tests containerd %s",
			b.Version, display(b.Containerd))}
	case "docker":
		// Kubernetes dropped dockershim in 1.24; cri-dockerd nodes report docker:// too.
		return Verdict{Older, fmt.Sprintf(
			"Docker (%s) is not supported by GPU Operator %s: run containerd %s (or CRI-O on OpenShift) on the GPU nodes",
			runtimeVersion, b.Version, display(b.Containerd))}
	default:
		return Verdict{Unknown, fmt.Sprintf(
			"container runtime %q is not one NVIDIA tests GPU Operator %s with (containerd %s, or CRI-O on OpenShift)",
			runtimeVersion, b.Version, display(b.Containerd))}
	}
}

// platform describes one kind of version a bundle is judged on.
type platform struct {
	name string
	// tested returns the tested range of a bundle; it is a function so the hint can look at the
	// other bundles of the catalog.
	tested func(Bundle) string
	// minimum is the oldest supported minor when it is below the tested range; empty means the
	// range's lower end.
	minimum string
	// caveat qualifies versions from minimum up to the tested range.
	caveat string
	// whatNext is the fix when the version is too old.
	whatNext string
}

// judge compares a major.minor version with the bundle's tested range for p.
func (b Bundle) judge(p platform, got *semver.Version) Verdict {
	tested := p.tested(b)
	lo, hi, err := span(tested)
	if err != nil {
		return Verdict{Unknown, fmt.Sprintf("GPU Operator %s has no readable %s range %q: %v", b.Version, p.name, tested, err)}
	}
	minimum := lo
	if p.minimum != "" {
		if minimum, err = minorOf(p.minimum); err != nil {
			return Verdict{Unknown, fmt.Sprintf("GPU Operator %s has no readable %s minimum %q: %v", b.Version, p.name, p.minimum, err)}
		}
	}
	v := short(got)
	switch {
	case got.LessThan(minimum):
		bounds := "tested on " + display(tested)
		if !minimum.Equal(lo) {
			bounds = "minimum " + short(minimum) + ", " + bounds
		}
		msg := fmt.Sprintf("%s %s is older than GPU Operator %s supports (%s): %s",
			p.name, v, b.Version, bounds, p.whatNext)
		if alt, ok := b.olderRelease(p, got); ok {
			msg += fmt.Sprintf(", or install GPU Operator %s (tested on %s)", alt.Version, display(p.tested(alt)))
		}
		return Verdict{Older, msg}
	case got.LessThan(lo):
		msg := fmt.Sprintf("%s %s is below the range GPU Operator %s was tested on (%s) but supported",
			p.name, v, b.Version, display(tested))
		if p.caveat != "" {
			msg += ": " + p.caveat
		}
		return Verdict{Supported, msg}
	case got.GreaterThan(hi):
		return Verdict{Newer, fmt.Sprintf(
			"%s %s is newer than GPU Operator %s was tested on (%s): it will probably work, but NVIDIA has not validated it",
			p.name, v, b.Version, display(tested))}
	default:
		return Verdict{Supported, fmt.Sprintf("%s %s is within the range GPU Operator %s was tested on (%s)",
			p.name, v, b.Version, display(tested))}
	}
}

// olderRelease finds the newest catalog release other than b whose tested range for p holds got:
// the hint for a cluster too old for b.
func (b Bundle) olderRelease(p platform, got *semver.Version) (Bundle, bool) {
	for _, c := range catalog() {
		if c.Version == b.Version {
			continue
		}
		lo, hi, err := span(p.tested(c))
		if err == nil && !got.LessThan(lo) && !got.GreaterThan(hi) {
			return c, true
		}
	}
	return Bundle{}, false
}

// span returns the two ends of a tested range written as a Masterminds hyphen range ("1.33 - 1.36"),
// after checking that Masterminds accepts it as a constraint.
func span(constraint string) (lo, hi *semver.Version, err error) {
	if strings.TrimSpace(constraint) == "" {
		return nil, nil, errors.New("no range recorded")
	}
	if _, err := semver.NewConstraint(constraint); err != nil {
		return nil, nil, err
	}
	from, to, ok := strings.Cut(constraint, " - ")
	if !ok {
		return nil, nil, errors.New(`want a hyphen range such as "1.33 - 1.36"`)
	}
	if lo, err = minorOf(from); err != nil {
		return nil, nil, err
	}
	if hi, err = minorOf(to); err != nil {
		return nil, nil, err
	}
	return lo, hi, nil
}

// display writes a hyphen range for people: "1.33 - 1.36" becomes "1.33 to 1.36".
func display(constraint string) string {
	return strings.Replace(constraint, " - ", " to ", 1)
}

// short writes a version as major.minor.
func short(v *semver.Version) string {
	return fmt.Sprintf("%d.%d", v.Major(), v.Minor())
}

// minorOf reads the major.minor of a version as platforms report it: an optional leading "v", then
// major.minor[.patch], then anything a distribution appends after "-" or "+" ("-gke.1172000",
// "+k3s1", "+vmware.1-fips-vkr.2", "-k3s1"), which is dropped. The result has patch 0.
func minorOf(s string) (*semver.Version, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(strings.TrimPrefix(s, "v"), "V")
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, errors.New("want major.minor[.patch]")
	}
	var n [3]uint64
	for i, p := range parts {
		x, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("want major.minor[.patch], %q is not a number", p)
		}
		n[i] = x
	}
	return semver.New(n[0], n[1], 0, "", ""), nil
}
