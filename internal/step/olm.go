package step

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/gpuctl/gpuctl/internal/health"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// catalogChannel is what a package's channel offers: the PackageManifest's default channel when none
// is given, its current CSV (the head), and every CSV it lists (status.channels[].entries, newest
// first; the head alone when the catalog lists no entries). One read of the PackageManifest.
func (x *executor) catalogChannel(ctx context.Context, source, pkg, channel string) (name, head string, offered []string, err error) {
	pm, err := x.clients.Dynamic.Resource(kube.PackageManifestGVR).Namespace("openshift-marketplace").Get(ctx, pkg, metav1.GetOptions{})
	if err != nil {
		return "", "", nil, fmt.Errorf("package %s in catalog %s: %w", pkg, source, err)
	}
	if channel == "" {
		channel, _, _ = unstructured.NestedString(pm.Object, "status", "defaultChannel")
	}
	chans, _, _ := unstructured.NestedSlice(pm.Object, "status", "channels")
	for _, c := range chans {
		m, _ := c.(map[string]any)
		if m["name"] != channel {
			continue
		}
		head, _ = m["currentCSV"].(string)
		entries, _ := m["entries"].([]any)
		for _, e := range entries {
			if em, ok := e.(map[string]any); ok {
				if n, _ := em["name"].(string); n != "" {
					offered = append(offered, n)
				}
			}
		}
		if len(offered) == 0 && head != "" {
			offered = []string{head}
		}
		return channel, head, offered, nil
	}
	return "", "", nil, fmt.Errorf("package %s has no channel %q", pkg, channel)
}

// channelHead is what a package's channel installs now (see catalogChannel).
func (x *executor) channelHead(ctx context.Context, source, pkg, channel string) (string, string, error) {
	name, head, _, err := x.catalogChannel(ctx, source, pkg, channel)
	return name, head, err
}

// olmValues fills in the channel a Subscription follows (and, for Manual approval, the CSV to start
// with) from the catalog, so the release records exactly what was subscribed to.
func (x *executor) olmValues(ctx context.Context, values map[string]any) (map[string]any, error) {
	return OLMValues(ctx, x.clients, values)
}

// OLMValues is what an OLM release step will apply: values with the channel a Subscription follows
// (and, for Manual approval, the CSV to start from) resolved from the catalog, as the run resolves
// them (upgrade's preview shows an unchanged Subscription as unchanged).
func OLMValues(ctx context.Context, clients *kube.Clients, values map[string]any) (map[string]any, error) {
	x := &executor{clients: clients}
	out := plan.MergeValues(values, nil)
	pkg, _ := values["package"].(string)
	source, _ := values["source"].(string)
	channel, _ := values["channel"].(string)
	ch, csv, offered, err := x.catalogChannel(ctx, source, pkg, channel)
	if err != nil {
		return nil, err
	}
	out["channel"] = ch
	if want, _ := values["startingCSV"].(string); want != "" {
		// The release asked for (--operator-version) must be in the channel, or OLM would wait forever
		// for a CSV the catalog does not offer there.
		if !slices.Contains(offered, want) {
			return nil, &runner.StepError{Err: fmt.Errorf("%w: channel %s of package %s does not offer %s (it offers %s)", plan.ErrInput, ch, pkg, want, strings.Join(offered, ", ")),
				Hint: "choose another --operator-version, or a --channel that has it (oc get packagemanifest " + pkg + " -n openshift-marketplace -o yaml lists them)"}
		}
	} else if values["installPlanApproval"] == "Manual" {
		out["startingCSV"] = csv
	}
	return out, nil
}

func splitTarget(target string) (ns, name string) {
	ns, name, _ = strings.Cut(target, "/")
	return ns, name
}

// untilObject watches one object by name until cond holds.
func untilObject(ctx context.Context, ri dynamic.NamespaceableResourceInterface, ns, name string, cond func(*unstructured.Unstructured) (bool, error)) (*unstructured.Unstructured, error) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	var last *unstructured.Unstructured
	_, err := watchtools.UntilWithSync(ctx, &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return ri.Namespace(ns).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return ri.Namespace(ns).Watch(ctx, o)
		},
	}, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok || ev.Type == watch.Deleted {
			return false, nil
		}
		last = u
		return cond(u)
	})
	return last, err
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

// approve approves exactly the InstallPlan that installs the CSV the Subscription's channel names,
// as NVIDIA's OpenShift guide does by hand; any other plan stays unapproved.
func (x *executor) approve(ctx context.Context, s *plan.Step, progress func(health.Progress)) (runner.Outcome, error) {
	ns, sub := splitTarget(s.Target)
	subObj, err := x.clients.Dynamic.Resource(kube.SubscriptionsGVR).Namespace(ns).Get(ctx, sub, metav1.GetOptions{})
	if err != nil {
		return runner.Outcome{}, err
	}
	spec, _, _ := unstructured.NestedStringMap(subObj.Object, "spec")
	want := spec["startingCSV"]
	if want == "" {
		if _, want, err = x.channelHead(ctx, spec["source"], spec["name"], spec["channel"]); err != nil {
			return runner.Outcome{}, err
		}
	}
	if installed, _, _ := unstructured.NestedString(subObj.Object, "status", "installedCSV"); installed == want {
		return runner.Outcome{Skipped: true, Message: want + " is installed"}, nil
	}
	if spec["installPlanApproval"] != "Manual" {
		return runner.Outcome{Skipped: true, Message: "Automatic approval"}, nil
	}
	progress(health.Progress{Message: "waiting for OLM's InstallPlan for " + want})
	ips := x.clients.Dynamic.Resource(kube.InstallPlansGVR).Namespace(ns)
	var planName string
	_, err = watchtools.UntilWithSync(ctx, &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return ips.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return ips.Watch(ctx, o)
		},
	}, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok || ev.Type == watch.Deleted {
			return false, nil
		}
		names, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "clusterServiceVersionNames")
		if slices.Contains(names, want) {
			planName = u.GetName()
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return runner.Outcome{}, fmt.Errorf("no InstallPlan for %s appeared: %w", want, err)
	}
	patch := []byte(`{"spec":{"approved":true}}`)
	if _, err := ips.Patch(ctx, planName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: kube.FieldManager}); err != nil {
		return runner.Outcome{}, fmt.Errorf("approve InstallPlan %s: %w", planName, err)
	}
	return runner.Outcome{Message: "approved InstallPlan " + planName + " for " + want, Changed: true}, nil
}

// clusterPolicy builds the ClusterPolicy from the installed CSV's alm-examples, merges the step's
// overrides over its spec, and server-side applies it.
func (x *executor) clusterPolicy(ctx context.Context, s *plan.Step) (runner.Outcome, error) {
	// OLM has just installed the bundle's CRDs: forget the discovery gpuctl cached before.
	x.clients.Refresh()
	ns, sub := splitTarget(s.Target)
	subObj, err := x.clients.Dynamic.Resource(kube.SubscriptionsGVR).Namespace(ns).Get(ctx, sub, metav1.GetOptions{})
	if err != nil {
		return runner.Outcome{}, err
	}
	csvName, _, _ := unstructured.NestedString(subObj.Object, "status", "installedCSV")
	csv, err := x.clients.Dynamic.Resource(kube.CSVsGVR).Namespace(ns).Get(ctx, csvName, metav1.GetOptions{})
	if err != nil {
		return runner.Outcome{}, fmt.Errorf("CSV %s: %w", csvName, err)
	}
	var examples []map[string]any
	if err := json.Unmarshal([]byte(csv.GetAnnotations()["alm-examples"]), &examples); err != nil {
		return runner.Outcome{}, fmt.Errorf("CSV %s alm-examples: %w", csvName, err)
	}
	var policy map[string]any
	for _, e := range examples {
		if e["kind"] == "ClusterPolicy" {
			policy = e
			break
		}
	}
	if policy == nil {
		return runner.Outcome{}, fmt.Errorf("CSV %s has no ClusterPolicy among its alm-examples", csvName)
	}
	spec, _ := policy["spec"].(map[string]any)
	policy["spec"] = plan.MergeValues(spec, s.PolicySpec)
	policy["metadata"] = map[string]any{"name": s.PolicyName}
	delete(policy, "status")
	out, err := x.objects(ctx, &plan.Step{Objects: []map[string]any{policy}})
	if err != nil {
		return out, err
	}
	out.Message = "from " + csvName + "'s alm-examples: " + out.Message
	return out, nil
}

func subscriptionDetail(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var b strings.Builder
	for _, c := range conds {
		m, _ := c.(map[string]any)
		fmt.Fprintf(&b, "%v=%v %v: %v\n", m["type"], m["status"], m["reason"], m["message"])
	}
	return strings.TrimSpace(b.String())
}
