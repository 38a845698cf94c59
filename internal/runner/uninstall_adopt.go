package runner

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

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

// RefuseUnrecorded returns an UnrecordedError when there is no install record, releases of gpuctl's
// names exist and Adopt is not set; nil otherwise. It only reads: the engine asks it before taking
// the lock, and Plan again under it.
func (u *Uninstaller) RefuseUnrecorded(ctx context.Context) error {
	if u.Record != nil || u.Adopt {
		return nil
	}
	rels, err := u.targets()
	if err != nil || len(rels) == 0 {
		return err
	}
	e := &UnrecordedError{}
	for _, r := range rels {
		managed, err := u.managedRelease(ctx, r)
		if err != nil {
			return err
		}
		e.Releases = append(e.Releases, FoundRelease{Name: r.name, Namespace: r.namespace, Gpuctl: managed})
	}
	return e
}

// managedRelease says whether the newest revision of release r carries gpuctl's release label, read
// from Helm's storage Secrets (labelled owner=helm, name=<release>, version=<revision>, and with the
// release's own labels: helm.sh/helm/v4 pkg/storage/driver/secrets.go at v4.3.1).
func (u *Uninstaller) managedRelease(ctx context.Context, r uninstallRelease) (bool, error) {
	sel := labels.SelectorFromSet(labels.Set{"owner": "helm", "name": r.name}).String()
	secrets, err := u.Clients.Kube.CoreV1().Secrets(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return false, fmt.Errorf("read release %s's revisions: %w", r.name, err)
	}
	newest, managed := -1, false
	for _, s := range secrets.Items {
		if v, err := strconv.Atoi(s.Labels["version"]); err == nil && v > newest {
			newest, managed = v, s.Labels[detect.ManagedReleaseLabel] == "true"
		}
	}
	return managed, nil
}
