package step

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// secretsKind creates Secrets from local inputs (NVAIE licensing). The verb reads the inputs before
// the run (Install.Secrets); their contents never reach an event, a dry run or an export.
type secretsKind struct{}

// Do applies the Secrets read before the run.
func (secretsKind) Do(ctx context.Context, x *executor, _ *plan.Step, _ func(health.Progress)) (runner.Outcome, error) {
	return applyObjects(ctx, x.clients, x.secrets)
}

// Writes: each Secret is created, or applied over the one there.
func (secretsKind) Writes(ctx context.Context, l *lister, s *plan.Step) error {
	for _, sec := range s.Secrets {
		w := plan.ObjectWrite{Step: s.ID, APIVersion: "v1", Kind: "Secret", Namespace: sec.Namespace, Name: sec.Name, Action: plan.WriteCreate}
		_, err := l.clients.Kube.CoreV1().Secrets(sec.Namespace).Get(ctx, sec.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			w.Action = plan.WriteApply
		case !apierrors.IsNotFound(err):
			return err
		}
		l.w.Objects = append(l.w.Objects, w)
	}
	return nil
}

func (secretsKind) State(ctx context.Context, x *executor, _ *plan.Step) (string, error) {
	return objectsState(ctx, x.clients, x.secrets)
}

func (secretsKind) Explained() bool { return false }

// Needs: the Secrets are written outside any render.
func (secretsKind) Needs(s *plan.Step, _ string) []preflight.Access {
	var out []preflight.Access
	for _, sec := range s.Secrets {
		out = append(out, access(sec.Namespace, "", "secrets", "get", "create", "patch")...)
	}
	return out
}

// Recorded: each Secret, by name.
func (secretsKind) Recorded(s *plan.Step) (Recorded, error) {
	var r Recorded
	for _, sec := range s.Secrets {
		r.Objects = append(r.Objects, record.Object{APIVersion: "v1", Kind: "Secret", Name: sec.Name, Namespace: sec.Namespace})
	}
	return r, nil
}

// Rendered: nothing; a render never holds a Secret's material.
func (secretsKind) Rendered(*plan.Step) Rendered { return Rendered{} }

// Exported: a note per Secret saying how to create it; its material never enters the export.
func (secretsKind) Exported(s *plan.Step) Exported {
	if s.Skip != "" {
		return Exported{}
	}
	var e Exported
	for _, sec := range s.Secrets {
		how := "kubectl create secret generic " + sec.Name + " -n " + sec.Namespace
		if sec.Type == "kubernetes.io/dockerconfigjson" {
			how = "kubectl create secret docker-registry " + sec.Name + " -n " + sec.Namespace + " --docker-server=" + sec.Server + " --docker-username='$oauthtoken' --docker-password=\"$NGC_API_KEY\""
		} else {
			for _, k := range sec.Keys {
				how += " --from-file=" + k + "=" + k
			}
		}
		e.Notes = append(e.Notes, fmt.Sprintf("Secret %s/%s (%s, keys %s) is referenced by the values, never written here: create it on each cluster before the operator's release (`%s`), or deliver it with your secrets tooling (SOPS, Sealed Secrets, External Secrets); never commit it",
			sec.Namespace, sec.Name, sec.Type, strings.Join(sec.Keys, ", "), how))
	}
	return e
}
