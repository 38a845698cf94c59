package release

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// maxHistory bounds the revisions kept per release, like `helm upgrade --history-max 10`.
const maxHistory = 10

// Client reaches Helm's release storage in one namespace.
type Client struct {
	cfg       *action.Configuration
	namespace string
}

// fieldManagerOnce guards the one write of Helm's package-level kube.ManagedFieldsManager.
var fieldManagerOnce sync.Once

// useHelmFieldManager makes gpuctl's Helm writes own their fields as the field manager "helm", as
// Helm's own CLI does (helm.sh/helm/v4 v4.3.1 cmd/helm/helm.go: kube.ManagedFieldsManager = "helm").
// Unset, Helm's SDK names the manager after the program (pkg/kube/client.go getManagedFieldsManager:
// "gpuctl", or "e2e.test" in tests), and a later `helm rollback`/`helm upgrade` of gpuctl's releases
// fails with server-side-apply conflicts against that manager. The variable is Helm's and
// process-wide, so it is set once, before any Client exists, and never changed back.
func useHelmFieldManager() {
	fieldManagerOnce.Do(func() { kube.ManagedFieldsManager = "helm" })
}

// New returns a Client for namespace that stores releases as Helm does by default (Secrets).
func New(getter genericclioptions.RESTClientGetter, namespace string, logger *slog.Logger) (*Client, error) {
	useHelmFieldManager()
	var opts []action.ConfigurationOption
	if logger != nil {
		opts = append(opts, action.ConfigurationSetLogger(logger.Handler()))
	}
	cfg := action.NewConfiguration(opts...)
	if err := cfg.Init(getter, namespace, "secret"); err != nil {
		return nil, fmt.Errorf("helm configuration: %w", err)
	}
	return &Client{cfg: cfg, namespace: namespace}, nil
}

// Clients opens one Client per namespace, on first use, and keeps it: what a run that reads or writes
// releases in several namespaces asks for.
type Clients struct {
	getter genericclioptions.RESTClientGetter
	byNS   map[string]*Client
}

// NewClients opens Clients from kubectl-style flags.
func NewClients(getter genericclioptions.RESTClientGetter) *Clients {
	return &Clients{getter: getter, byNS: map[string]*Client{}}
}

// ClientsOf are Clients over existing ones, by namespace (tests give Helm's in-memory storage).
func ClientsOf(byNS map[string]*Client) *Clients {
	return &Clients{byNS: byNS}
}

// In is the Client for namespace ns.
func (c *Clients) In(ns string) (*Client, error) {
	if rc, ok := c.byNS[ns]; ok {
		return rc, nil
	}
	rc, err := New(c.getter, ns, nil)
	if err != nil {
		return nil, err
	}
	c.byNS[ns] = rc
	return rc, nil
}

// NewWithConfiguration wraps an existing Helm configuration (tests use Helm's in-memory storage and
// fake Kubernetes client).
func NewWithConfiguration(cfg *action.Configuration, namespace string) *Client {
	useHelmFieldManager()
	return &Client{cfg: cfg, namespace: namespace}
}

// Namespace is where the client's releases live.
func (c *Client) Namespace() string { return c.namespace }

// Release is what gpuctl needs to know of a Helm release.
type Release struct {
	Name         string         `json:"name"`
	Namespace    string         `json:"namespace"`
	Revision     int            `json:"revision"`
	Status       string         `json:"status"`
	Chart        string         `json:"chart"`
	ChartVersion string         `json:"chartVersion"`
	AppVersion   string         `json:"appVersion,omitempty"`
	Updated      time.Time      `json:"updated"`
	Description  string         `json:"description,omitempty"`
	Values       map[string]any `json:"values,omitempty"`
}

func fromHelm(r *releasev1.Release) *Release {
	out := &Release{Name: r.Name, Namespace: r.Namespace, Revision: r.Version, Values: r.Config}
	if r.Info != nil {
		out.Status = string(r.Info.Status)
		out.Updated = r.Info.LastDeployed
		out.Description = r.Info.Description
	}
	if r.Chart != nil && r.Chart.Metadata != nil {
		out.Chart = r.Chart.Metadata.Name
		out.ChartVersion = r.Chart.Metadata.Version
		out.AppVersion = r.Chart.Metadata.AppVersion
	}
	return out
}

func asV1(r any) (*releasev1.Release, error) {
	rel, ok := r.(*releasev1.Release)
	if !ok {
		return nil, fmt.Errorf("unexpected Helm release type %T", r)
	}
	return rel, nil
}

// Last returns the newest revision of a release in any state, or nil when there is none.
func (c *Client) Last(name string) (*Release, error) {
	r, err := c.last(name)
	if err != nil || r == nil {
		return nil, err
	}
	return fromHelm(r), nil
}

// Manifest is the manifest of a release's newest revision in any state: the objects `helm uninstall`
// deletes. Empty when there is no such release.
func (c *Client) Manifest(name string) (string, error) {
	r, err := c.last(name)
	if err != nil || r == nil {
		return "", err
	}
	return r.Manifest, nil
}

func (c *Client) last(name string) (*releasev1.Release, error) {
	r, err := c.cfg.Releases.Last(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read release %s: %w", name, err)
	}
	return asV1(r)
}

// history is every stored revision of a release, oldest first (none: nil). Storage errors are
// errors, never "no release".
func (c *Client) history(name string) ([]*releasev1.Release, error) {
	rs, err := c.cfg.Releases.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("history of release %s: %w", name, err)
	}
	out := make([]*releasev1.Release, 0, len(rs))
	for _, r := range rs {
		v1, err := asV1(r)
		if err != nil {
			return nil, err
		}
		if v1.Info == nil {
			return nil, fmt.Errorf("release %s revision %d has no status", name, v1.Version)
		}
		out = append(out, v1)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// History lists every stored revision of a release, oldest first.
func (c *Client) History(name string) ([]*Release, error) {
	rs, err := c.history(name)
	if err != nil {
		return nil, err
	}
	out := make([]*Release, 0, len(rs))
	for _, r := range rs {
		out = append(out, fromHelm(r))
	}
	return out, nil
}

// ReleasesDir is the directory of a chart that holds what differs per upstream release:
// releases/<version>/crds/ replaces the chart's crds/ when the chart is loaded for that release. It is
// never part of a loaded chart (nor of a Helm release's stored chart).
const ReleasesDir = "releases"

// LoadChart loads a chart from a directory of an fs.FS (gpuctl's embedded charts), as written: for the
// release its Chart.yaml names.
func LoadChart(fsys fs.FS, dir string) (*chart.Chart, error) {
	return LoadChartRelease(fsys, dir, "")
}

// LoadChartRelease loads a chart for one upstream release (appVersion, e.g. "v26.3.3"; "" or the
// chart's own appVersion: as written). For another release the chart must have
// releases/<appVersion>/crds/: those CRDs replace crds/, and appVersion and version (appVersion
// without its "v") are stamped into the metadata, so templates that branch on .Chart.AppVersion render
// that release, and `helm list` shows it.
func LoadChartRelease(fsys fs.FS, dir, appVersion string) (*chart.Chart, error) {
	var files []*archive.BufferedFile
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, dir+"/")
		if d.IsDir() && rel == ReleasesDir {
			return fs.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		files = append(files, &archive.BufferedFile{Name: path.Clean(rel), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read chart %s: %w", dir, err)
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	if appVersion == "" || appVersion == ch.Metadata.AppVersion {
		return ch, nil
	}
	crdDir := path.Join(dir, ReleasesDir, appVersion, "crds")
	entries, err := fs.ReadDir(fsys, crdDir)
	if err != nil {
		return nil, fmt.Errorf("chart %s has nothing for release %s (no %s/%s/crds/): %w", dir, appVersion, ReleasesDir, appVersion, err)
	}
	kept := ch.Files[:0]
	for _, f := range ch.Files {
		if !strings.HasPrefix(f.Name, "crds/") {
			kept = append(kept, f)
		}
	}
	ch.Files = kept
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := fs.ReadFile(fsys, path.Join(crdDir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read chart %s: %w", dir, err)
		}
		ch.Files = append(ch.Files, &chartcommon.File{Name: "crds/" + e.Name(), Data: data})
	}
	ch.Metadata.AppVersion = appVersion
	ch.Metadata.Version = strings.TrimPrefix(appVersion, "v")
	return ch, nil
}

// sameValues compares values as Helm stores them (JSON), so 1 and 1.0 or nil and {} don't differ.
func sameValues(a, b map[string]any) bool {
	na, errA := normalize(a)
	nb, errB := normalize(b)
	if errA != nil || errB != nil {
		return false
	}
	return reflect.DeepEqual(na, nb)
}

func normalize(v map[string]any) (map[string]any, error) {
	if len(v) == 0 {
		return map[string]any{}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	return out, json.Unmarshal(b, &out)
}

func isPending(s common.Status) bool {
	return s == common.StatusPendingInstall || s == common.StatusPendingUpgrade || s == common.StatusPendingRollback
}

// ctxTimeout is the time left before ctx's deadline, or def when it has none.
func ctxTimeout(ctx context.Context, def time.Duration) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		if left := time.Until(d); left > 0 {
			return left
		}
	}
	return def
}
