package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/metadata"

	"github.com/gpuctl/gpuctl/internal/distro"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/support"
)

// openShiftNFDNamespace is where Red Hat's NFD Operator runs on OpenShift (NVIDIA/cloud-native-docs
// openshift/install-nfd.rst), the namespace gpuctl installs it into there.
const openShiftNFDNamespace = "openshift-nfd"

// Support collects a support bundle (`gpuctl diagnose`): versions, the install record, Helm
// history, the ClusterPolicy and NVIDIADrivers, the operator's and NFD's namespaces (pods,
// DaemonSets, Deployments, events, container logs), the GPU nodes, and what `gpuctl status` and
// `gpuctl check --pre` say. It only reads. Every part is collected on its own: what the caller may
// not read, or what fails, is noted in the bundle's manifest and the rest goes on.
type Support struct {
	Clients *kube.Clients
	// APIVersion and GpuctlVersion stamp the manifest.
	APIVersion    string
	GpuctlVersion string
	// Timeout bounds the whole collection (0: DefaultSupportTimeout); CallTimeout each API call.
	Timeout     time.Duration
	CallTimeout time.Duration
	// StatusText and CheckText render the status and check --pre reports as those commands print
	// them (the CLI passes its text renderers); nil leaves the text form out.
	StatusText func(io.Writer, *StatusResult) error
	CheckText  func(io.Writer, preflight.Report) error
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Releases opens Helm's release storage in a namespace (nil: release.New with Clients.Getter).
	Releases func(namespace string) (*release.Client, error)
}

// SupportResult is the collected bundle, ready to be written.
type SupportResult struct {
	Bundle *support.Bundle
}

// Versions is versions.json of the bundle.
type Versions struct {
	Gpuctl     string `json:"gpuctl"`
	Kubernetes string `json:"kubernetes,omitempty"`
	// Operator is the operator release the install record names; OperatorImage the image its
	// Deployment runs.
	Operator      string `json:"operator,omitempty"`
	OperatorImage string `json:"operatorImage,omitempty"`
	// Releases are the Helm releases' latest revisions: chart version and app version.
	Releases map[string]string `json:"releases,omitempty"`
	// Drivers are, per GPU node, the CUDA driver version GPU feature discovery labels
	// (nvidia.com/cuda.driver.major/minor/rev) and the driver container's image.
	Drivers map[string]NodeDriver `json:"drivers,omitempty"`
}

// NodeDriver is the driver on one node.
type NodeDriver struct {
	Version string `json:"version,omitempty"`
	Image   string `json:"image,omitempty"`
}

// Run collects. It fails only when the context is cancelled (an interrupt); a read that fails or is
// refused, and the collection's own time limit, are noted in the bundle, which is returned.
func (s *Support) Run(ctx context.Context) (*SupportResult, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultSupportTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b := support.NewBundle(s.APIVersion, s.GpuctlVersion, now())
	col := &support.Collector{Kube: s.Clients.Kube, Dynamic: s.Clients.Dynamic, Bundle: b, CallTimeout: s.CallTimeout}
	if s.Clients.Config != nil {
		if mc, err := metadata.NewForConfig(s.Clients.Config); err == nil {
			col.Metadata = mc
		}
	}
	v := Versions{Gpuctl: s.GpuctlVersion, Releases: map[string]string{}, Drivers: map[string]NodeDriver{}}
	if sv, err := s.serverVersion(ctx); err != nil {
		b.Fail("server version", err)
	} else {
		v.Kubernetes = sv
	}

	rec, ns, nfdNS := s.record(ctx, b, &v)
	s.helmHistory(b, ns, rec, v.Releases)
	col.Resources(ctx, health.ClusterPolicyResource(), "cluster/clusterpolicies.yaml", "ClusterPolicy objects with their status and conditions")
	col.Resources(ctx, health.NVIDIADriverResource(), "cluster/nvidiadrivers.yaml", "NVIDIADriver objects with their status and conditions")
	nodes := col.Nodes(ctx)
	pods := col.Namespace(ctx, ns)
	if nfdNS != ns {
		col.Namespace(ctx, nfdNS)
	}
	s.versions(&v, nodes, pods)
	if err := b.AddObject("versions.json", "versions: gpuctl, Kubernetes, the operator, Helm releases, the driver per GPU node", v); err != nil {
		b.Fail("versions.json", err)
	}
	s.status(ctx, b)
	s.check(ctx, b, rec)
	if err := ctx.Err(); errors.Is(err, context.Canceled) {
		// Interrupted (Ctrl-C): no bundle, so none is taken for a complete one.
		return nil, err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		b.Note("the collection stopped at its time limit (%s): later parts may be missing", timeout)
	}
	return &SupportResult{Bundle: b}, nil
}

// record adds the install record to the bundle and says where the stack and NFD run (the client's
// namespace when there is no record).
func (s *Support) record(ctx context.Context, b *support.Bundle, v *Versions) (rec *record.Record, ns, nfdNS string) {
	rctx, rcancel := context.WithTimeout(ctx, callTimeout(s.CallTimeout))
	rec, err := record.Read(rctx, s.Clients.Kube)
	rcancel()
	ns, nfdNS = s.Clients.Namespace, s.Clients.Namespace
	switch {
	case err != nil:
		b.Fail("install record "+record.Namespace+"/"+record.Name, err)
	case rec == nil:
		b.Note("no install record %s/%s: gpuctl has not installed on this cluster, or it was purged", record.Namespace, record.Name)
	default:
		ns, nfdNS = rec.Namespace, rec.Namespace
		if distro.Get(rec.Distribution).OLM {
			nfdNS = openShiftNFDNamespace
		}
		v.Operator = rec.OperatorVersion
		if err := b.AddObject("install-record.json", "the install record "+record.Namespace+"/"+record.Name+": inputs, releases and objects gpuctl applied", rec); err != nil {
			b.Fail("install-record.json", err)
		}
	}
	return rec, ns, nfdNS
}

// serverVersion asks discovery, which takes no context, within the call timeout.
func (s *Support) serverVersion(ctx context.Context) (string, error) {
	type answer struct {
		v   string
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		sv, err := s.Clients.Discovery.ServerVersion()
		if err != nil {
			ch <- answer{err: err}
			return
		}
		ch <- answer{v: sv.GitVersion}
	}()
	ctx, cancel := context.WithTimeout(ctx, callTimeout(s.CallTimeout))
	defer cancel()
	select {
	case a := <-ch:
		return a.v, a.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func callTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return support.DefaultCallTimeout
	}
	return d
}

// helmHistory stores, per release gpuctl knows of in the operator namespace, its revisions
// (status, chart, app version) and each revision's values, redacted. Helm keeps releases in
// Secrets: a caller who may not read them gets a forbidden note.
func (s *Support) helmHistory(b *support.Bundle, ns string, rec *record.Record, latest map[string]string) {
	names := []string{plan.NFDRelease, plan.OperatorRelease}
	if rec != nil {
		for _, r := range rec.Releases {
			if (r.Namespace == "" || r.Namespace == ns) && !slices.Contains(names, r.Name) {
				names = append(names, r.Name)
			}
		}
	}
	open := s.Releases
	if open == nil {
		open = func(ns string) (*release.Client, error) { return release.New(s.Clients.Getter, ns, nil) }
	}
	rc, err := open(ns)
	if err != nil {
		b.Fail("helm releases in "+ns, err)
		return
	}
	for _, name := range names {
		hist, err := rc.History(name)
		if err != nil {
			b.Fail("helm history of "+name, err)
			continue
		}
		if len(hist) == 0 {
			b.Note("no Helm release %s in %s", name, ns)
			continue
		}
		type revision struct {
			Revision     int       `json:"revision"`
			Status       string    `json:"status"`
			Chart        string    `json:"chart"`
			ChartVersion string    `json:"chartVersion"`
			AppVersion   string    `json:"appVersion,omitempty"`
			Updated      time.Time `json:"updated"`
			Description  string    `json:"description,omitempty"`
		}
		revs := make([]revision, 0, len(hist))
		for _, r := range hist {
			revs = append(revs, revision{r.Revision, r.Status, r.Chart, r.ChartVersion, r.AppVersion, r.Updated, r.Description})
			file := fmt.Sprintf("helm/%s/values-%d.yaml", name, r.Revision)
			if err := b.AddObject(file, fmt.Sprintf("the user-supplied values of release %s revision %d (helm get values), redacted", name, r.Revision), r.Values); err != nil {
				b.Fail(file, err)
			}
		}
		last := hist[len(hist)-1]
		latest[name] = fmt.Sprintf("%s %s (app %s), revision %d, %s", last.Chart, last.ChartVersion, last.AppVersion, last.Revision, last.Status)
		if err := b.AddObject("helm/"+name+"/history.yaml", "revisions of release "+name+" (helm history)", revs); err != nil {
			b.Fail("helm/"+name+"/history.yaml", err)
		}
	}
}

// versions fills the operator image and each GPU node's driver. GPU feature discovery (NVIDIA/k8s-device-plugin,
// its generated labels) labels the driver version in nvidia.com/cuda.driver.major, .minor and .rev,
// and in newer releases also nvidia.com/cuda.driver-version.full.
func (s *Support) versions(v *Versions, nodes []corev1.Node, pods []corev1.Pod) {
	for _, n := range nodes {
		var d NodeDriver
		l := n.Labels
		switch full := l["nvidia.com/cuda.driver-version.full"]; {
		case full != "":
			d.Version = full
		case l["nvidia.com/cuda.driver.major"] != "":
			parts := []string{l["nvidia.com/cuda.driver.major"]}
			for _, k := range []string{"nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev"} {
				if v := l[k]; v != "" {
					parts = append(parts, v)
				}
			}
			d.Version = strings.Join(parts, ".")
		}
		v.Drivers[n.Name] = d
	}
	for _, p := range pods {
		switch {
		case p.Labels["app"] == driverApp && p.Spec.NodeName != "":
			d := v.Drivers[p.Spec.NodeName]
			for _, c := range p.Spec.Containers {
				if strings.Contains(c.Name, "driver") {
					d.Image = c.Image
					break
				}
			}
			v.Drivers[p.Spec.NodeName] = d
		case strings.HasPrefix(p.Name, plan.OperatorDeployment+"-") && len(p.Spec.Containers) > 0 && v.OperatorImage == "":
			for _, ref := range p.OwnerReferences {
				if ref.Kind == "ReplicaSet" && strings.HasPrefix(ref.Name, plan.OperatorDeployment+"-") {
					v.OperatorImage = p.Spec.Containers[0].Image
				}
			}
		}
	}
}

// status stores what `gpuctl status` reports, as JSON and as text.
func (s *Support) status(ctx context.Context, b *support.Bundle) {
	res, err := (&Status{Clients: s.Clients}).Run(ctx)
	if err != nil && !errors.Is(err, ErrNotInstalled) {
		b.Fail("gpuctl status", err)
	}
	if res == nil {
		return
	}
	if err := b.AddObject("status.json", "gpuctl status -o json", res); err != nil {
		b.Fail("status.json", err)
	}
	if s.StatusText != nil {
		var out bytes.Buffer
		if err := s.StatusText(&out, res); err != nil {
			b.Fail("status.txt", err)
			return
		}
		b.AddText("status.txt", "gpuctl status", out.String())
	}
}

// check stores what `gpuctl check --pre` reports for the recorded install's profile and release
// (the defaults without a record). No licensing input is given, so none is read.
func (s *Support) check(ctx context.Context, b *support.Bundle, rec *record.Record) {
	var o InstallOptions
	if rec != nil {
		o.Profile, o.OperatorVersion = rec.Inputs.Profile, rec.OperatorVersion
	}
	res, err := (&Check{Clients: s.Clients, Options: o}).Run(ctx)
	if err != nil && !errors.Is(err, preflight.ErrFailed) {
		b.Fail("gpuctl check --pre", err)
	}
	if res == nil || len(res.Report.Results) == 0 {
		return
	}
	if err := b.AddObject("check-pre.json", "gpuctl check --pre -o json", res.Report); err != nil {
		b.Fail("check-pre.json", err)
	}
	if s.CheckText != nil {
		var out bytes.Buffer
		if err := s.CheckText(&out, res.Report); err != nil {
			b.Fail("check-pre.txt", err)
			return
		}
		b.AddText("check-pre.txt", "gpuctl check --pre", out.String())
	}
}
