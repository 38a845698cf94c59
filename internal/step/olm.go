package step

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

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

// splitTarget splits a step's "namespace/name" Target.
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

// subscriptionDetail is a Subscription's status conditions, one per line, for a failed wait on its CSV.
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
