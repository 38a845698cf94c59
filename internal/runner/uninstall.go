package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
)

// Custom resources of the operator (NVIDIA/gpu-operator api/nvidia/v1 and v1alpha1@v26.7.0) and NFD.
var (
	nodeFeaturesGVR = schema.GroupVersionResource{Group: "nfd.k8s-sigs.io", Version: "v1alpha1", Resource: "nodefeatures"}
)

// Uninstaller plans an uninstall and carries the plan out, step by step.
type Uninstaller struct {
	Clients *kube.Clients
	// Record is the install record (nil: an install by a gpuctl that wrote none).
	Record *record.Record
	// Purge also deletes the CRDs and namespaces gpuctl created; Force lets it delete CRDs with
	// custom resources gpuctl did not create.
	Purge, Force bool
	// Adopt takes the releases of gpuctl's names as gpuctl's when there is no install record (without
	// it such an uninstall is refused: UnrecordedError).
	Adopt bool
	// FinalizerWait is how long a deleted object may stay before the step names what holds it.
	FinalizerWait time.Duration
	Sink          event.Sink
	// releases are the Helm clients, by namespace (nil: opened from Clients.Getter).
	releases *release.Clients
	// rels are the releases to remove, p the plan.
	rels []uninstallRelease
	p    *UninstallPlan
	// owners are the UIDs of the ClusterPolicy and NVIDIADriver objects deleted, and of the
	// DaemonSets they owned when last seen: what they own must be gone before uninstall says it is
	// done. A DaemonSet stays here after it is gone, so its pods are still waited for.
	owners map[types.UID]bool
	// keptNamespaces are the namespaces gpuctl created that --purge kept: they held objects gpuctl
	// did not create.
	keptNamespaces []KeptNamespace
}

func (u *Uninstaller) releaseClient(ns string) (*release.Client, error) {
	if u.releases == nil {
		u.releases = release.NewClients(u.Clients.Getter)
	}
	return u.releases.In(ns)
}

func (u *Uninstaller) namespace() string {
	if u.Record != nil && u.Record.Namespace != "" {
		return u.Record.Namespace
	}
	return u.Clients.Namespace
}

// ours reports whether gpuctl installed the release (so the labels of its stack are gpuctl's to
// remove). Without a record, only what --adopt takes is.
func (u *Uninstaller) ours(names ...string) bool {
	if u.Record == nil {
		return u.Adopt
	}
	for _, n := range names {
		if u.Record.Release(n) != nil {
			return true
		}
	}
	return false
}

// steps are the plan's parts as the runner carries them out, in the reverse order of install.
func (u *Uninstaller) steps() []Step {
	steps := []Step{{ID: stepDeleteCustomResources, Title: "Delete the ClusterPolicy and NVIDIADriver objects gpuctl created",
		Do: messages(func(ctx context.Context, progress func(string)) (Outcome, error) {
			return u.deletePlanned(ctx, stepDeleteCustomResources, progress)
		}),
		Hint: "kubectl get clusterpolicy,nvidiadriver shows them"}}
	waitDependents := Step{ID: "wait-operands", Title: "Wait until the objects they owned are gone", Do: messages(u.waitDependents),
		Hint: "kubectl -n " + u.namespace() + " get daemonsets,pods,serviceaccounts; kubectl get clusterroles,clusterrolebindings show what is left"}
	if !slices.ContainsFunc(u.rels, func(r uninstallRelease) bool { return releaseOrder(r.name) == 0 }) {
		steps = append(steps, waitDependents)
	}
	for _, r := range u.rels {
		steps = append(steps, u.releaseSteps(r)...)
		if releaseOrder(r.name) == 0 {
			// After the operator has stopped: an object its last reconcile created while the
			// ClusterPolicy went is owned by it too, and goes only now.
			steps = append(steps, waitDependents)
		}
	}
	steps = append(steps,
		Step{ID: "untaint", Title: "Remove the taints gpuctl added", Do: messages(u.untaint)},
		Step{ID: "node-labels", Title: "Remove the node labels NFD and the operator wrote", Do: messages(u.nodeMetadata)})
	if u.Purge {
		steps = append(steps,
			Step{ID: "purge-objects", Title: "Delete the other objects gpuctl created", Do: messages(u.purgeObjects)},
			Step{ID: "purge-crds", Title: "Delete the CRDs gpuctl created", Do: messages(u.purgeCRDs)},
			Step{ID: "purge-namespaces", Title: "Delete the namespaces gpuctl created", Do: messages(u.purgeNamespaces)})
	}
	return append(steps, Step{ID: "record", Title: "Install record " + record.Namespace + "/" + record.Name, Do: messages(u.updateRecord)})
}

// releaseSteps remove release r (and, for OpenShift's NFD operator, the instance gpuctl created first).
func (u *Uninstaller) releaseSteps(r uninstallRelease) []Step {
	var steps []Step
	if r.name == "nfd-operator" {
		steps = append(steps, Step{ID: stepDeleteNFDInstance, Title: "Delete the NodeFeatureDiscovery instance gpuctl created",
			Do: messages(func(ctx context.Context, progress func(string)) (Outcome, error) {
				return u.deletePlanned(ctx, stepDeleteNFDInstance, progress)
			})})
	}
	return append(steps, Step{ID: releaseStep(r.name), Title: "Uninstall release " + r.name,
		Do: messages(func(ctx context.Context, progress func(string)) (Outcome, error) {
			return u.uninstallRelease(ctx, r, progress)
		}),
		Hint: "helm history " + r.name + " -n " + r.namespace + " shows the release's revisions"})
}

// messages adapts a handler that reports its progress as plain messages.
func messages(do func(context.Context, func(string)) (Outcome, error)) func(context.Context, func(health.Progress)) (Outcome, error) {
	return func(ctx context.Context, progress func(health.Progress)) (Outcome, error) {
		return do(ctx, func(m string) { progress(health.Progress{Message: m}) })
	}
}

// UninstallResume is what an interrupted uninstall tells the user to do.
const UninstallResume = "run gpuctl uninstall again: it continues where it stopped"

// Run carries out plan p (made by Plan) step by step.
func (u *Uninstaller) Run(ctx context.Context, p *UninstallPlan) (*Runner, error) {
	u.p = p
	r := &Runner{Sink: u.Sink, Resume: UninstallResume}
	return r, r.Run(ctx, u.steps())
}

// KeptNamespaces are the namespaces gpuctl created that the run's --purge kept, with what they hold
// that gpuctl did not create.
func (u *Uninstaller) KeptNamespaces() []KeptNamespace { return u.keptNamespaces }

func (u *Uninstaller) updateRecord(ctx context.Context, _ func(string)) (Outcome, error) {
	switch {
	case u.Record == nil:
		return Outcome{Skipped: true, Message: "none"}, nil
	case u.Purge && len(u.keptNamespaces) == 0:
		if err := record.Delete(ctx, u.Clients.Kube); err != nil {
			return Outcome{}, err
		}
		return Outcome{Changed: true, Message: "deleted"}, nil
	case u.Purge:
		// What it kept is still gpuctl's to delete once it holds nothing else: the record keeps it,
		// and nothing more (the rest is gone, or was not the object gpuctl created).
		r := *u.Record
		r.Uninstalled, r.Command, r.Result, r.Updated = true, "uninstall", "succeeded", time.Now().UTC()
		r.Releases, r.TaintedNodes, r.CustomResources, r.TracksCustomResources = nil, nil, nil, true
		r.CRDs, r.Objects, r.Namespaces = nil, nil, nil
		for _, o := range u.Record.Namespaces {
			if o.Created && slices.ContainsFunc(u.keptNamespaces, func(k KeptNamespace) bool { return k.Name == o.Name }) {
				r.Namespaces = append(r.Namespaces, o)
			}
		}
		if err := record.Write(ctx, u.Clients.Kube, &r); err != nil {
			return Outcome{}, err
		}
		var names []string
		for _, o := range r.Namespaces {
			names = append(names, o.Name)
		}
		return Outcome{Changed: true, Message: "keeps only the namespaces --purge kept (" + strings.Join(names, ", ") +
			"), for a later uninstall --purge"}, nil
	case u.Record.Uninstalled:
		return Outcome{Skipped: true, Message: "already says uninstalled; uninstall --purge removes what gpuctl created"}, nil
	}
	r := *u.Record
	r.Uninstalled, r.Command, r.Result, r.Updated = true, "uninstall", "succeeded", time.Now().UTC()
	// Every custom resource gpuctl created is gone (the plan deleted them by UID).
	r.Releases, r.TaintedNodes, r.CustomResources, r.TracksCustomResources = nil, nil, nil, true
	if err := record.Write(ctx, u.Clients.Kube, &r); err != nil {
		return Outcome{}, err
	}
	kept := len(record.CreatedNames(r.CRDs)) + len(record.CreatedNames(r.Namespaces)) + len(record.CreatedNames(r.Objects))
	msg := "marked uninstalled"
	if kept > 0 {
		msg += fmt.Sprintf("; it keeps the %d CRDs, namespaces and other objects gpuctl created, for uninstall --purge", kept)
	}
	return Outcome{Changed: true, Message: msg}, nil
}
