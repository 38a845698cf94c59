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
