package uninstall

import (
	"fmt"
	"strings"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/record"
)

// FoundRelease is a Helm release of one of gpuctl's release names, found with no install record.
type FoundRelease struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Gpuctl: its newest revision carries gpuctl's release label (detect.ManagedReleaseLabel=true), which
	// every revision gpuctl writes has. Without it, someone else installed it under that name.
	Gpuctl bool `json:"gpuctl"`
}

// String names the release and whether it carries gpuctl's release label.
func (f FoundRelease) String() string {
	s := f.Namespace + "/" + f.Name
	if f.Gpuctl {
		return s + " (labelled " + detect.ManagedReleaseLabel + "=true)"
	}
	return s + " (no " + detect.ManagedReleaseLabel + " label)"
}

// UnrecordedError refuses an uninstall that has no install record to go by but finds releases with
// gpuctl's names: nothing says what gpuctl created, so it takes nothing as its own unless told to
// (--adopt). It is a failed preflight (exit 5): nothing was changed.
type UnrecordedError struct {
	Releases []FoundRelease
}

// Error names the releases found and the way out, --adopt, on one line.
func (e *UnrecordedError) Error() string {
	names := make([]string, len(e.Releases))
	for i, r := range e.Releases {
		names[i] = r.String()
	}
	return fmt.Sprintf("no install record %s/%s, but releases with gpuctl's names are installed: %s; gpuctl cannot tell they are its own: "+
		"--adopt takes them as gpuctl's (their releases, custom resources and the stack's node labels go)",
		record.Namespace, record.Name, strings.Join(names, ", "))
}

// Unwrap makes the refusal a failed preflight.
func (e *UnrecordedError) Unwrap() error { return preflight.ErrFailed }

// RefuseUnrecorded returns an UnrecordedError when s has no install record, releases of gpuctl's
// names are installed and o does not adopt them; nil otherwise. It is pure: the engine asks it of
// ReadReleases' snapshot before taking the lock, and Build asks it again of Read's under it.
func RefuseUnrecorded(s *Snapshot, o Options) error {
	if s.Record != nil || o.Adopt || len(s.Releases) == 0 {
		return nil
	}
	e := &UnrecordedError{}
	for _, r := range byRole(s.Releases) {
		e.Releases = append(e.Releases, FoundRelease{Name: r.Name, Namespace: r.Namespace, Gpuctl: r.Gpuctl})
	}
	return e
}
