package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/render"
)

// stateTimeout bounds the look at the cluster an interrupted run takes to say where it stopped.
const stateTimeout = 10 * time.Second

// InterruptedError is what Install returns when the run was interrupted (Ctrl-C, SIGTERM). It wraps
// context.Canceled and says how far the run got: the steps that finished, the one in flight with its
// real state as read back from the cluster, and the ones that never started.
type InterruptedError struct {
	// BeforeFirstWrite: the run stopped while taking the lock, detecting, planning or in preflight,
	// so nothing was changed.
	BeforeFirstWrite bool `json:"beforeFirstWrite,omitempty"`
	// Finished are the steps that ended (succeeded or skipped) before the interrupt, in order.
	Finished []StepResult `json:"finished,omitempty"`
	// InFlight is the step the interrupt stopped, its Message the state it left behind; nil when the
	// run stopped between two steps.
	InFlight *StepResult `json:"inFlight,omitempty"`
	// NotStarted are the IDs of the steps that never began.
	NotStarted []string `json:"notStarted,omitempty"`
	// Count is the number of steps in the plan.
	Count int `json:"count,omitempty"`
	// Resume says how to go on ("run gpuctl install again: …").
	Resume string `json:"resume,omitempty"`
}

func (e *InterruptedError) Error() string {
	switch {
	case e.BeforeFirstWrite:
		return "interrupted before the first write: nothing was changed"
	case e.InFlight != nil:
		return fmt.Sprintf("interrupted during step %d/%d (%s): %s", len(e.Finished)+1, e.Count, e.InFlight.Title, e.InFlight.Message)
	default:
		return fmt.Sprintf("interrupted after step %d/%d", len(e.Finished), e.Count)
	}
}

// Unwrap makes errors.Is(err, context.Canceled) true.
func (e *InterruptedError) Unwrap() error { return context.Canceled }

// Interrupted: the run's context was cancelled by the user (a signal), not by its deadline and not
// because the install lock was lost (that cancellation carries lock.ErrLost as its cause).
func Interrupted(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.Canceled) && errors.Is(context.Cause(ctx), context.Canceled)
}

// readState reads back what an interrupted step of an install Plan left in the cluster: a release's
// status and revision, how many CRDs are established, how many GPU nodes carry the taint, which
// objects exist ("" for a wait: it changed nothing).
func (x *executor) readState(ctx context.Context, s *plan.Step) (string, error) {
	switch s.Kind {
	case plan.KindSafety:
		return "nothing changed (the check only reads)", nil
	case plan.KindRelease:
		rc, err := x.releaseClient(s.Release.Namespace)
		if err != nil {
			return "", err
		}
		r, err := rc.Last(s.Release.Name)
		if err != nil {
			return "", err
		}
		if r == nil {
			return "release " + s.Release.Name + ": not installed", nil
		}
		return fmt.Sprintf("release %s: %s revision %d", r.Name, r.Status, r.Revision), nil
	case plan.KindCRDs:
		var names []string
		for _, name := range s.Charts {
			crds, _, err := render.ChartCRDs(name, s.ChartReleases[name])
			if err != nil {
				return "", err
			}
			for _, c := range crds {
				names = append(names, c.Name)
			}
		}
		established := 0
		for _, n := range names {
			crd, err := x.clients.Extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return "", err
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					established++
				}
			}
		}
		return fmt.Sprintf("%d/%d CRDs established", established, len(names)), nil
	case plan.KindTaint:
		// One list, not a GET per GPU node.
		nodes, err := x.clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		gpu := map[string]bool{}
		for _, n := range x.gpuNodes {
			gpu[n] = true
		}
		tainted := 0
		for _, node := range nodes.Items {
			if !gpu[node.Name] {
				continue
			}
			for _, t := range node.Spec.Taints {
				if t.Key == s.Taint.Key && t.Effect == corev1.TaintEffect(s.Taint.Effect) {
					tainted++
					break
				}
			}
		}
		return fmt.Sprintf("%d/%d GPU nodes tainted %s=%s:%s", tainted, len(x.gpuNodes), s.Taint.Key, s.Taint.Value, s.Taint.Effect), nil
	case plan.KindObjects, plan.KindSecrets:
		objs := s.Objects
		if s.Kind == plan.KindSecrets {
			objs = x.secrets
		}
		var missing []string
		for _, o := range objs {
			u := &unstructured.Unstructured{Object: o}
			exists, err := x.exists(ctx, u)
			if err != nil {
				return "", err
			}
			if !exists {
				missing = append(missing, u.GetKind()+" "+u.GetName())
			}
		}
		msg := fmt.Sprintf("%d/%d objects exist", len(objs)-len(missing), len(objs))
		if len(missing) > 0 {
			msg += " (missing: " + strings.Join(missing, ", ") + ")"
		}
		return msg, nil
	case plan.KindClusterPolicy:
		u, err := x.clients.Dynamic.Resource(health.ClusterPolicyResource()).Get(ctx, s.PolicyName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "ClusterPolicy " + s.PolicyName + " does not exist", nil
		}
		if err != nil {
			return "", err
		}
		return "ClusterPolicy " + u.GetName() + " exists", nil
	}
	return "", nil
}

// exists reports whether the object is in the cluster.
func (x *executor) exists(ctx context.Context, u *unstructured.Unstructured) (bool, error) {
	gvk := u.GroupVersionKind()
	m, err := x.clients.Mapper.RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}, gvk.Version)
	if err != nil {
		return false, err
	}
	var get func() (*unstructured.Unstructured, error)
	if u.GetNamespace() != "" {
		get = func() (*unstructured.Unstructured, error) {
			return x.clients.Dynamic.Resource(m.Resource).Namespace(u.GetNamespace()).Get(ctx, u.GetName(), metav1.GetOptions{})
		}
	} else {
		get = func() (*unstructured.Unstructured, error) {
			return x.clients.Dynamic.Resource(m.Resource).Get(ctx, u.GetName(), metav1.GetOptions{})
		}
	}
	_, err = get()
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
