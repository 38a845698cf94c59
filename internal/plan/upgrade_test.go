package plan

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckVersions(t *testing.T) {
	for _, tc := range []struct {
		name, from, to string
		force          bool
		want           VersionChange
		wantErr        bool
	}{
		{"a newer release is an upgrade", "v25.10.1", "v26.7.0", false, VersionUpgrade, false},
		{"a newer patch release is an upgrade", "v26.3.2", "v26.3.3", false, VersionUpgrade, false},
		{"the same release changes no version", "v26.7.0", "v26.7.0", false, VersionSame, false},
		{"an older release is refused", "v26.7.0", "v25.10.1", false, VersionDowngrade, true},
		{"an older release is allowed with --force", "v26.7.0", "v25.10.1", true, VersionDowngrade, false},
		{"an install that recorded no version is not guarded", "", "v26.7.0", false, VersionUpgrade, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CheckVersions(tc.from, tc.to, tc.force)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error: %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInput) {
				t.Errorf("a refused downgrade is not an input error: %v", err)
			}
			if err != nil && !strings.Contains(err.Error(), "--force") {
				t.Errorf("the error does not say how to proceed: %v", err)
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestUpgradeNotes(t *testing.T) {
	t.Run("crossing into v26 names the CRDs, the release notes and the Values section", func(t *testing.T) {
		notes := strings.Join(UpgradeNotes("v25.10.1", "v26.7.0", true), "\n")
		for _, want := range []string{"CRDs", "release-notes", "under Values", "nvidia.com/gpu-driver-upgrade-state"} {
			if !strings.Contains(notes, want) {
				t.Errorf("notes lack %q:\n%s", want, notes)
			}
		}
	})
	t.Run("no version change has no notes", func(t *testing.T) {
		if n := UpgradeNotes("v26.7.0", "v26.7.0", true); len(n) != 0 {
			t.Errorf("notes %v", n)
		}
	})
}
