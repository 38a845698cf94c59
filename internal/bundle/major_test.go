package bundle

import (
	"slices"
	"testing"
)

func TestMajor(t *testing.T) {
	for _, tc := range []struct {
		version, want string
		ok            bool
	}{
		{"v26.3.3", "26.3", true},
		{"26.7.0", "26.7", true},
		{"v25.10.1", "25.10", true},
		{"not-a-version", "", false},
	} {
		t.Run(tc.version, func(t *testing.T) {
			got, err := Major(tc.version)
			if got != tc.want || (err == nil) != tc.ok {
				t.Errorf("Major(%q) = %q, %v; want %q (ok %v)", tc.version, got, err, tc.want, tc.ok)
			}
		})
	}
}

func TestMajorsAreTheNewestReleaseOfEachMajorOldestFirst(t *testing.T) {
	var got []string
	for _, b := range Majors() {
		got = append(got, b.Version)
	}
	if want := []string{"v25.10.1", "v26.3.3", "v26.7.0"}; !slices.Equal(got, want) {
		t.Errorf("Majors() = %v, want %v", got, want)
	}
}
