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
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// ManagedByLabel marks the Helm releases gpuctl made (a Helm storage label, shown by
// `helm list --selector`).
const ManagedByLabel = "gpuctl.io/managed"

// maxHistory bounds the revisions kept per release, like `helm upgrade --history-max 10`.
const maxHistory = 10

// Client reaches Helm's release storage in one namespace.
type Client struct {
	cfg       *action.Configuration
	namespace string
}

// New returns a Client for namespace that stores releases as Helm does by default (Secrets).
func New(getter genericclioptions.RESTClientGetter, namespace string, logger *slog.Logger) (*Client, error) {
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

// NewWithConfiguration wraps an existing Helm configuration (tests use Helm's in-memory storage and
// fake Kubernetes client).
func NewWithConfiguration(cfg *action.Configuration, namespace string) *Client {
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

// History lists every stored revision of a release, oldest first.
func (c *Client) History(name string) ([]*Release, error) {
	rs, err := c.cfg.Releases.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", name, err)
	}
	out := make([]*Release, 0, len(rs))
	for _, r := range rs {
		v1, err := asV1(r)
		if err != nil {
			return nil, err
		}
		out = append(out, fromHelm(v1))
	}
	sortByRevision(out)
	return out, nil
}

// LoadChart loads a chart from a directory of an fs.FS (gpuctl's embedded charts).
func LoadChart(fsys fs.FS, dir string) (*chart.Chart, error) {
	var files []*archive.BufferedFile
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		rel := p[len(dir)+1:]
		files = append(files, &archive.BufferedFile{Name: path.Clean(rel), ModTime: time.Time{}, Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read chart %s: %w", dir, err)
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
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
