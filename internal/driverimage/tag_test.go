package driverimage

import "testing"

func TestPrecompiledTag(t *testing.T) {
	if got, want := PrecompiledTag("595", "6.8.0-60-generic", "ubuntu24.04"), "595-6.8.0-60-generic-ubuntu24.04"; got != want {
		t.Errorf("PrecompiledTag = %q, want %q", got, want)
	}
}

func TestOSTagFromImage(t *testing.T) {
	for _, tc := range []struct{ image, want string }{
		{"Ubuntu 24.04.2 LTS", "ubuntu24.04"},
		{"Ubuntu 22.04.5 LTS", "ubuntu22.04"},
		{"Ubuntu 26.04 LTS", "ubuntu26.04"},
		{"Red Hat Enterprise Linux 9.4 (Plow)", "rhel9"},
		{"Rocky Linux 9.7 (Blue Onyx)", "rocky9"},
		{"Red Hat Enterprise Linux CoreOS 9.6.20250101-0 (Plow)", ""},
		{"SUSE Linux Enterprise Server 15 SP6", "sles15.6"},
		{"Container-Optimized OS from Google", ""},
		{"Amazon Linux 2023.7.20250512", ""},
	} {
		t.Run(tc.image+" is tagged "+tc.want, func(t *testing.T) {
			if got := OSTagFromImage(tc.image); got != tc.want {
				t.Errorf("OSTagFromImage(%q) = %q, want %q", tc.image, got, tc.want)
			}
		})
	}
}

func TestKernelLabel(t *testing.T) {
	for _, tc := range []struct{ kernel, want string }{
		{"6.8.0-60-generic", "6.8.0-60-generic"},
		{"6.6.97+", "6.6.97"},
		{"5.14.0-427.13.1.el9_4.x86_64", "5.14.0-427.13.1.el9_4.x86_64"},
		{"6.1.0+debug~1", "6.1.0_debug_1"},
	} {
		if got := KernelLabel(tc.kernel); got != tc.want {
			t.Errorf("KernelLabel(%q) = %q, want %q", tc.kernel, got, tc.want)
		}
	}
}

func TestBranch(t *testing.T) {
	for version, want := range map[string]string{"580.95.05": "580", "595": "595", "": ""} {
		if got := Branch(version); got != want {
			t.Errorf("Branch(%q) = %q, want %q", version, got, want)
		}
	}
}
