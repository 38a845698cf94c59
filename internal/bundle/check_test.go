package bundle

import (
	"fmt"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
)

func mustGet(t *testing.T, version string) Bundle {
	t.Helper()
	b, err := Get(version)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type verdictCase struct {
	name, release, in, status string
	// mention are strings the message must contain.
	mention []string
}

func runVerdicts(t *testing.T, cases []verdictCase, check func(Bundle, string) Verdict) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := check(mustGet(t, tc.release), tc.in)
			if v.Status != tc.status {
				t.Errorf("status = %q, want %q (message %q)", v.Status, tc.status, v.Message)
			}
			if v.Message == "" {
				t.Errorf("empty message")
			}
			for _, m := range tc.mention {
				if !strings.Contains(v.Message, m) {
					t.Errorf("message %q does not mention %q", v.Message, m)
				}
			}
		})
	}
}

func TestCheckKubernetes(t *testing.T) {
	runVerdicts(t, []verdictCase{
		{"v26.7.0 supports its lowest tested minor", "v26.7.0", "v1.33.0", Supported, []string{"1.33", "1.33 to 1.36"}},
		{"v26.7.0 supports a GKE build of a tested minor", "v26.7.0", "v1.33.4-gke.1172000", Supported, []string{"1.33"}},
		{"v26.7.0 supports a VKS FIPS build of a tested minor", "v26.7.0", "v1.33.6+vmware.1-fips-vkr.2", Supported, nil},
		{"v26.7.0 supports any patch of its highest tested minor", "v26.7.0", "v1.36.9", Supported, nil},
		{"v26.7.0 supports 1.32 only with the Ubuntu 24.04 caveat", "v26.7.0", "v1.32.5", Supported, []string{"Ubuntu 24.04"}},
		{"v26.7.0 warns on the next untested minor", "v26.7.0", "v1.37.2", Newer, []string{"1.37", "not validated"}},
		{"v26.7.0 fails a k3s cluster below its minimum and names a release that fits", "v26.7.0", "v1.31.5+k3s1", Older, []string{"1.31", "v25.10.1"}},
		{"v26.7.0 fails a very old cluster with its minimum and no other release", "v26.7.0", "v1.27.3", Older, []string{"minimum 1.32", "upgrade the cluster"}},
		{"v26.3.3 supports 1.36 from the v26.3.2 documentation", "v26.3.3", "v1.36.0", Supported, nil},
		{"v26.3.3 supports 1.32", "v26.3.3", "1.32.1", Supported, nil},
		{"v26.3.3 fails 1.31 and offers v25.10.1", "v26.3.3", "v1.31.0", Older, []string{"v25.10.1"}},
		{"v26.3.3 warns on 1.37", "v26.3.3", "v1.37.0", Newer, nil},
		{"v25.10.1 supports 1.30", "v25.10.1", "v1.30.14-eks-113cf36", Supported, nil},
		{"v25.10.1 warns on 1.35", "v25.10.1", "v1.35.1", Newer, nil},
		{"v25.10.1 fails 1.29", "v25.10.1", "v1.29.9", Older, nil},
		{"a major.minor without a patch is read", "v26.7.0", "1.34", Supported, nil},
		{"an empty version is unknown", "v26.7.0", "", Unknown, nil},
		{"a word is unknown", "v26.7.0", "latest", Unknown, []string{`"latest"`}},
		{"a major alone is unknown", "v26.7.0", "v1", Unknown, nil},
	}, Bundle.CheckKubernetes)
}

func TestCheckOpenShift(t *testing.T) {
	runVerdicts(t, []verdictCase{
		{"v26.7.0 supports OpenShift 4.18", "v26.7.0", "4.18.30", Supported, []string{"4.18 to 4.22"}},
		{"v26.7.0 supports OpenShift 4.22 as ClusterVersion writes it", "v26.7.0", "v4.22.1", Supported, nil},
		{"v26.7.0 warns on OpenShift 4.23", "v26.7.0", "4.23.0", Newer, nil},
		{"v26.7.0 fails OpenShift 4.17 and offers v26.3.3", "v26.7.0", "4.17.12", Older, []string{"v26.3.3", "upgrade OpenShift"}},
		{"v26.3.3 supports OpenShift 4.17", "v26.3.3", "4.17.0", Supported, nil},
		{"v26.3.3 warns on OpenShift 4.22", "v26.3.3", "4.22.3", Newer, nil},
		{"v25.10.1 supports OpenShift 4.14", "v25.10.1", "4.14.40", Supported, nil},
		{"v25.10.1 fails OpenShift 4.13", "v25.10.1", "4.13.0", Older, nil},
		{"an OKD build is read by its minor", "v26.7.0", "4.19.0-okd-scos.17", Supported, nil},
		{"garbage is unknown", "v26.7.0", "four.eighteen", Unknown, nil},
	}, Bundle.CheckOpenShift)
}

func TestCheckContainerd(t *testing.T) {
	runVerdicts(t, []verdictCase{
		{"v26.7.0 supports containerd 2.1 from k3s", "v26.7.0", "containerd://2.1.4-k3s1", Supported, []string{"2.1"}},
		{"v26.7.0 supports containerd 2.3", "v26.7.0", "containerd://2.3.0", Supported, nil},
		{"v26.7.0 warns on containerd 2.4", "v26.7.0", "containerd://2.4.1", Newer, nil},
		{"v26.7.0 fails containerd 1.7 and offers v26.3.3", "v26.7.0", "containerd://1.7.27", Older, []string{"1.7", "v26.3.3", "upgrade containerd"}},
		{"v26.3.3 supports containerd 1.7", "v26.3.3", "containerd://1.7.27", Supported, nil},
		{"v26.3.3 warns on containerd 2.3", "v26.3.3", "containerd://2.3.0", Newer, nil},
		{"v25.10.1 supports containerd 2.1", "v25.10.1", "containerd://2.1.0", Supported, nil},
		{"v25.10.1 fails containerd 1.6", "v25.10.1", "containerd://1.6.33", Older, nil},
		{"a bare version is containerd's", "v26.7.0", "2.0.5", Supported, nil},
		{"containerd with a v is read", "v26.7.0", "containerd://v2.2.0", Supported, nil},
		{"CRI-O is supported on OpenShift", "v26.7.0", "cri-o://1.31.4", Supported, []string{"CRI-O", "OpenShift"}},
		{"Docker is not supported", "v26.7.0", "docker://28.1.1", Older, []string{"Docker", "containerd"}},
		{"an unknown runtime is unknown", "v26.7.0", "remote://1.0", Unknown, []string{"remote://1.0"}},
		{"an unreadable containerd version is unknown", "v26.7.0", "containerd://devel", Unknown, nil},
	}, Bundle.CheckContainerd)
}

func TestVerdictsOfABundleWithoutRanges(t *testing.T) {
	var b Bundle
	for name, v := range map[string]Verdict{
		"Kubernetes": b.CheckKubernetes("v1.34.0"),
		"OpenShift":  b.CheckOpenShift("4.20.0"),
		"containerd": b.CheckContainerd("containerd://2.1.0"),
	} {
		t.Run("an empty "+name+" range gives unknown, not supported", func(t *testing.T) {
			if v.Status != Unknown {
				t.Errorf("status = %q (%s), want unknown", v.Status, v.Message)
			}
		})
	}
}

// TestRangesMeanTheSameToMasterminds proves the tested ranges read as span reads them: a caller that
// feeds the constraint strings to Masterminds directly gets the same answer as the Check methods.
func TestRangesMeanTheSameToMasterminds(t *testing.T) {
	for _, b := range List() {
		for name, r := range map[string]string{"Kubernetes": b.Kubernetes, "OpenShift": b.OpenShift, "containerd": b.Containerd} {
			t.Run(fmt.Sprintf("%s's %s range %q holds its ends and nothing past them", b.Version, name, r), func(t *testing.T) {
				c, err := semver.NewConstraint(r)
				if err != nil {
					t.Fatal(err)
				}
				lo, hi, err := span(r)
				if err != nil {
					t.Fatal(err)
				}
				inside := []*semver.Version{lo, semver.New(lo.Major(), lo.Minor(), 7, "", ""), hi, semver.New(hi.Major(), hi.Minor(), 12, "", "")}
				outside := []*semver.Version{semver.New(hi.Major(), hi.Minor()+1, 0, "", "")}
				if lo.Minor() > 0 {
					outside = append(outside, semver.New(lo.Major(), lo.Minor()-1, 9, "", ""))
				}
				for _, v := range inside {
					if !c.Check(v) {
						t.Errorf("%q rejects %s", r, v)
					}
				}
				for _, v := range outside {
					if c.Check(v) {
						t.Errorf("%q accepts %s", r, v)
					}
				}
			})
		}
	}
}

func TestTestedRanges(t *testing.T) {
	want := map[string][4]string{
		// Kubernetes, minimum, OpenShift, containerd
		// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html)
		"v26.7.0":  {"1.33 - 1.36", "1.32", "4.18 - 4.22", "1.8 - 2.3"},
		"v26.3.3":  {"1.32 - 1.36", "1.32", "4.17 - 4.21", "1.7 - 2.2"},
		"v25.10.1": {"1.30 - 1.34", "1.30", "4.14 - 4.20", "1.7 - 2.1"},
	}
	for release, w := range want {
		t.Run(release+" records the ranges of NVIDIA's support matrix", func(t *testing.T) {
			b := mustGet(t, release)
			got := [4]string{b.Kubernetes, b.KubernetesMinimum, b.OpenShift, b.Containerd}
			if got != w {
				t.Errorf("ranges = %q, want %q", got, w)
			}
		})
	}
}
