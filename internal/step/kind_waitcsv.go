package step

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// waitCSV is the kind that waits until an OLM Subscription's CSV has Succeeded.
func waitCSV() Kind {
	return waiting{do: func(ctx context.Context, x *executor, s *plan.Step, progress func(health.Progress)) (runner.Outcome, error) {
		return x.waitCSV(ctx, s, progress)
	}, needs: func(s *plan.Step, _ string) []preflight.Access {
		ns, _ := splitTarget(s.Target)
		return append(access(ns, kube.SubscriptionsGVR.Group, kube.SubscriptionsGVR.Resource, "get", "list", "watch"),
			access(ns, kube.CSVsGVR.Group, kube.CSVsGVR.Resource, "get", "list", "watch")...)
	}}
}

// waitCSV waits for the Subscription to install the CSV it resolved (status.currentCSV; during an
// upgrade status.installedCSV still names the old one until the approved InstallPlan has run) and for
// that CSV to reach Succeeded.
func (x *executor) waitCSV(ctx context.Context, s *plan.Step, progress func(health.Progress)) (runner.Outcome, error) {
	ns, sub := splitTarget(s.Target)
	progress(health.Progress{Message: "waiting for subscription " + sub + " to install a CSV"})
	subObj, err := untilObject(ctx, x.clients.Dynamic.Resource(kube.SubscriptionsGVR), ns, sub, func(u *unstructured.Unstructured) (bool, error) {
		installed, _, _ := unstructured.NestedString(u.Object, "status", "installedCSV")
		current, _, _ := unstructured.NestedString(u.Object, "status", "currentCSV")
		if installed != "" && current != "" && installed != current {
			progress(health.Progress{Message: "subscription " + sub + ": " + installed + " installed, waiting for " + current})
		}
		return installed != "" && (current == "" || installed == current), nil
	})
	if err != nil {
		return runner.Outcome{}, &runner.StepError{Err: fmt.Errorf("subscription %s/%s installed no CSV: %w", ns, sub, err), Detail: subscriptionDetail(subObj),
			Hint: "oc get subscription,installplan -n " + ns + " shows what OLM is waiting for"}
	}
	csvName, _, _ := unstructured.NestedString(subObj.Object, "status", "installedCSV")
	var phase string
	csv, err := untilObject(ctx, x.clients.Dynamic.Resource(kube.CSVsGVR), ns, csvName, func(u *unstructured.Unstructured) (bool, error) {
		phase, _, _ = unstructured.NestedString(u.Object, "status", "phase")
		progress(health.Progress{Message: "CSV " + csvName + ": " + phase})
		return phase == "Succeeded", nil
	})
	if err != nil {
		reason, msg := "", ""
		if csv != nil {
			reason, _, _ = unstructured.NestedString(csv.Object, "status", "reason")
			msg, _, _ = unstructured.NestedString(csv.Object, "status", "message")
		}
		return runner.Outcome{}, &runner.StepError{Err: fmt.Errorf("CSV %s/%s is %s, not Succeeded: %w", ns, csvName, phase, err),
			Detail: strings.TrimSpace(reason + " " + msg), Hint: "oc describe csv " + csvName + " -n " + ns}
	}
	return runner.Outcome{Message: csvName + " Succeeded"}, nil
}
