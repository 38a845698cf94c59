package charts

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/e2e/upstream"
	"github.com/gpuctl/gpuctl/internal/bundle"
	gpurelease "github.com/gpuctl/gpuctl/internal/release"
)

// The oracle: NVIDIA's own gpu-operator chart of each release gpuctl installs, rendered from the pinned
// sources (deployments/gpu-operator/ of NVIDIA/gpu-operator at the release tag) next to ours for the
// same release, with the same values. What users and the operator read must be the same: the
// ClusterPolicy spec, the NVIDIADriver specs, the operator Deployment, the RBAC the operator holds, and
// which objects exist. Every difference must be fixed or be one of oracleDeviations, each explained
// in docs/nvidia-chart-deviations.md.

// oracleKubeVersion is in the tested range of every release in the catalog (v25.10.1: 1.30-1.34,
// v26.7.0: 1.33-1.36).
const oracleKubeVersion = "v1.34.0"

// oracleDeviation is one documented difference from NVIDIA's chart. A difference matches when the
// release, the values case and the object agree ("" matches any) and its path equals path, or starts
// with it when path ends in "*".
type oracleDeviation struct {
	release, values, object, path string
	// doc is the title of the section of docs/nvidia-chart-deviations.md that explains it; why is the
	// short reason.
	doc, why string
}

// The sections of docs/nvidia-chart-deviations.md the deviations refer to.
const (
	oracleDocHelmHooks                    = "Helm hooks"
	oracleDocChartLabels                  = "Chart labels"
	oracleDocOperatorPlacement            = "Operator placement on older releases"
	oracleDocNVIDIADriverForSelectedNodes = "NVIDIADriver for selected nodes"
	oracleDocOpenShiftSCC                 = "OpenShift SecurityContextConstraints"
)

// oracleDeviations are the differences docs/nvidia-chart-deviations.md documents. An entry that no
// longer matches anything fails the test too, so the list cannot outlive what it excuses.
var oracleDeviations = []oracleDeviation{
	// "Helm hooks": gpuctl applies and upgrades the CRDs itself, and never deletes a GPUCluster it did
	// not create.
	{object: "Job/gpu-operator-upgrade-crd", doc: oracleDocHelmHooks, why: "CRDs are applied by gpuctl, not by a hook"},
	{object: "ServiceAccount/gpu-operator-upgrade-crd-hook-sa", doc: oracleDocHelmHooks, why: "CRDs are applied by gpuctl, not by a hook"},
	{object: "ClusterRole/gpu-operator-upgrade-crd-hook-role", doc: oracleDocHelmHooks, why: "CRDs are applied by gpuctl, not by a hook"},
	{object: "ClusterRoleBinding/gpu-operator-upgrade-crd-hook-binding", doc: oracleDocHelmHooks, why: "CRDs are applied by gpuctl, not by a hook"},
	{release: "v26.7.0", object: "Job/gpu-operator-cleanup-gpucluster", doc: oracleDocHelmHooks, why: "gpuctl uninstall deletes the GPUCluster it created"},
	{values: "openshift-cleanup", object: "Job/gpu-operator-cleanup-crd", doc: oracleDocHelmHooks, why: "gpuctl removes CRDs itself, on request"},

	// On OpenShift gpuctl installs the operator through OLM, whose CSV brings its own SCCs.
	{values: "openshift-cleanup", object: "SecurityContextConstraints/restricted-readonly", doc: oracleDocOpenShiftSCC, why: "on OpenShift gpuctl installs through OLM"},

	// "Chart labels": this chart's own version and gpuctl's part-of label.
	{object: "Deployment/gpu-operator", path: `metadata.labels["helm.sh/chart"]`, doc: oracleDocChartLabels, why: "chart version without the v"},
	{object: "Deployment/gpu-operator", path: `spec.template.metadata.labels["helm.sh/chart"]`, doc: oracleDocChartLabels, why: "chart version without the v"},
	{object: "Deployment/gpu-operator", path: `metadata.labels["app.kubernetes.io/part-of"]`, doc: oracleDocChartLabels, why: "gpuctl finds its objects by it"},
	{object: "Deployment/gpu-operator", path: `spec.template.metadata.labels["app.kubernetes.io/part-of"]`, doc: oracleDocChartLabels, why: "gpuctl finds its objects by it"},
	{object: "Deployment/gpu-operator", path: "metadata.labels.app", doc: oracleDocChartLabels, why: "gpuctl finds the operator Deployment by it"},
	{object: "ClusterPolicy/cluster-policy", path: `spec.daemonsets.labels["helm.sh/chart"]`, doc: oracleDocChartLabels, why: "operand pods do not carry the chart version"},

	// "Operator placement on older releases": v26.7.0's placement for every release.
	{release: "v26.3.3", object: "Deployment/gpu-operator", path: "spec.template.spec.nodeSelector*", doc: oracleDocOperatorPlacement, why: "the operator image runs on Linux only"},
	{release: "v25.10.1", object: "Deployment/gpu-operator", path: "spec.template.spec.nodeSelector*", doc: oracleDocOperatorPlacement, why: "the operator image runs on Linux only"},
	{release: "v25.10.1", object: "Deployment/gpu-operator", path: "spec.template.spec.tolerations*", doc: oracleDocOperatorPlacement, why: "node-role.kubernetes.io/master is gone from Kubernetes"},
	{release: "v25.10.1", object: "Deployment/gpu-operator", path: "spec.template.spec.affinity*", doc: oracleDocOperatorPlacement, why: "node-role.kubernetes.io/master is gone from Kubernetes"},

	// "NVIDIADriver for selected nodes": v26.7.0's chart drops the nodeSelector and makes the driver the
	// default one; ours keeps the selection and makes it a non-default driver.
	{release: "v26.7.0", values: "nvidiadriver-selector", object: "NVIDIADriver/default", path: "spec.default", doc: oracleDocNVIDIADriverForSelectedNodes, why: "a selecting driver is not the default one"},
	{release: "v26.7.0", values: "nvidiadriver-selector", object: "NVIDIADriver/default", path: "spec.nodeSelector", doc: oracleDocNVIDIADriverForSelectedNodes, why: "the nodeSelector the values ask for is kept"},
}

// oracleDifference is one path-level difference between the two renders.
type oracleDifference struct {
	object, path, detail string
}

func (d oracleDifference) String() string {
	if d.path == "" {
		return d.object + ": " + d.detail
	}
	return d.object + " " + d.path + ": " + d.detail
}

func (dev oracleDeviation) matches(release, values string, d oracleDifference) bool {
	if dev.release != "" && dev.release != release || dev.values != "" && dev.values != values ||
		dev.object != "" && dev.object != d.object {
		return false
	}
	if p, ok := strings.CutSuffix(dev.path, "*"); ok {
		return strings.HasPrefix(d.path, p)
	}
	return d.path == dev.path
}

// TestOracleNVIDIAChart renders NVIDIA's chart and ours for every release of gpuctl's catalog with
// NVIDIA's complete values.yaml of that release and with each values file of testdata/oracle/, and
// fails on every difference oracleDeviations does not list.
func TestOracleNVIDIAChart(t *testing.T) {
	used := make([]bool, len(oracleDeviations))
	ran := false
	for _, b := range bundle.List() {
		t.Run(b.Version, func(t *testing.T) {
			tree := upstream.TreeT(t, b.Version)
			nv := oracleNVIDIAChart(t, tree, b.Version)
			ours, err := gpurelease.LoadChartRelease(FS, gpuChart, b.Version)
			if err != nil {
				t.Fatalf("our chart for %s: %v\n(the chart needs releases/%s/crds/ to load for this release)", b.Version, err, b.Version)
			}
			_, err = os.Stat(filepath.Join(tree, "deployments", "gpu-operator", "templates", "gpucluster.yaml"))
			nvHasGPUCluster := err == nil
			for _, oc := range oracleCases(t, tree) {
				t.Run(oc.name, func(t *testing.T) {
					if oracleWantsGPUCluster(oc.vals) && !nvHasGPUCluster {
						// NVIDIA's chart of this release has no GPUCluster and silently renders no CR at
						// all; ours refuses instead.
						oracleRefuses(t, ours, oc.vals, "has no GPUCluster")
						return
					}
					// gpuctl puts the bundle's image pins under the user's values for a release that is not
					// the chart's own (internal/plan: chart defaults < bundle < profile < facts < -f < --set);
					// NVIDIA's chart of that release has those images as its defaults.
					ourVals := oc.vals
					if !b.Default {
						ourVals = oracleMerge(b.Values(), oc.vals)
					}
					nvObjs := oracleRender(t, nv, oc.vals)
					ourObjs := oracleRender(t, ours, ourVals)
					for _, d := range oracleCompare(nvObjs, ourObjs) {
						excused := false
						for i, dev := range oracleDeviations {
							if dev.matches(b.Version, oc.name, d) {
								used[i], excused = true, true
							}
						}
						if !excused {
							t.Errorf("%s", d)
						}
					}
				})
			}
			ran = true
		})
	}
	if !ran || t.Failed() {
		return
	}
	for i, dev := range oracleDeviations {
		if !used[i] {
			t.Errorf("deviation %+v matches no difference any more: remove it here and in docs/nvidia-chart-deviations.md", dev)
		}
	}
}

// TestOracleDeviationsAreDocumented: every deviation the oracle excuses has its section in the page
// readers open, docs/nvidia-chart-deviations.md.
func TestOracleDeviationsAreDocumented(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "docs", "nvidia-chart-deviations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dev := range oracleDeviations {
		if dev.doc == "" || dev.why == "" {
			t.Errorf("deviation %+v has no doc section or no reason", dev)
			continue
		}
		if !strings.Contains(string(page), "\n### "+dev.doc+"\n") {
			t.Errorf("deviation %+v: docs/nvidia-chart-deviations.md has no section %q", dev, "### "+dev.doc)
		}
	}
}

// oracleNVIDIAChart loads NVIDIA's chart from a source tree, stamped as NVIDIA's release workflow
// packages it (.github/workflows/release-rc-assets.yaml: helm package --version TAG --app-version TAG).
func oracleNVIDIAChart(t *testing.T, tree, tag string) *chart.Chart {
	t.Helper()
	ch, err := loader.LoadDir(filepath.Join(tree, "deployments", "gpu-operator"))
	if err != nil {
		t.Fatalf("load NVIDIA's chart of %s: %v", tag, err)
	}
	ch.Metadata.Version, ch.Metadata.AppVersion = tag, tag
	return ch
}

type oracleCase struct {
	name string
	vals map[string]any
}

// oracleCases are NVIDIA's complete values.yaml of the release and every testdata/oracle/*.yaml.
func oracleCases(t *testing.T, tree string) []oracleCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "oracle", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(tree, "deployments", "gpu-operator", "values.yaml")}, files...)
	var out []oracleCase
	for i, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		vals := map[string]any{}
		if err := yaml.Unmarshal(data, &vals); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		if i == 0 {
			name = "nvidia-values"
		}
		out = append(out, oracleCase{name: name, vals: vals})
	}
	return out
}

// oracleWantsGPUCluster: the values ask for the DRA GPUCluster (gpuCluster.deployCR).
func oracleWantsGPUCluster(vals map[string]any) bool {
	gc, _ := vals["gpuCluster"].(map[string]any)
	on, _ := gc["deployCR"].(bool)
	return on
}

// oracleRefuses renders ch with vals and wants the render to fail naming want.
func oracleRefuses(t *testing.T, ch *chart.Chart, vals map[string]any, want string) {
	t.Helper()
	_, err := oracleRenderErr(t, ch, vals)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("render %s with %v: err = %v, want a refusal naming %q", ch.Metadata.AppVersion, vals, err, want)
	}
}

// oracleMerge returns src merged over a copy of dst the way gpuctl layers values: maps key by key,
// anything else replaced.
func oracleMerge(dst, src map[string]any) map[string]any {
	out := maps.Clone(dst)
	for k, v := range src {
		sm, ok1 := v.(map[string]any)
		dm, ok2 := out[k].(map[string]any)
		if ok1 && ok2 {
			out[k] = oracleMerge(dm, sm)
			continue
		}
		out[k] = v
	}
	return out
}

// oracleObject is one rendered object of the gpu-operator chart itself (not of a subchart).
type oracleObject struct {
	obj  map[string]any
	hook bool
}

// oracleRender renders ch as `helm install --dry-run` does (hooks kept apart), offline, and decodes
// every object of the chart's own templates, with integers as int64 as the API server would read them.
func oracleRender(t *testing.T, ch *chart.Chart, vals map[string]any) map[string]oracleObject {
	t.Helper()
	out, err := oracleRenderErr(t, ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// oracleRenderErr is oracleRender with the render's error returned.
func oracleRenderErr(t *testing.T, ch *chart.Chart, vals map[string]any) (map[string]oracleObject, error) {
	t.Helper()
	cfg := action.NewConfiguration()
	cfg.Releases = storage.Init(driver.NewMemory())
	cfg.KubeClient = &kubefake.PrintingKubeClient{Out: io.Discard}
	caps := *common.DefaultCapabilities
	kv, err := common.ParseKubeVersion(oracleKubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	caps.KubeVersion = *kv
	// A v1.34 cluster serves DRA's resource.k8s.io/v1 (GA), which both charts check for the GPUCluster.
	caps.APIVersions = append(slices.Clone(caps.APIVersions), "resource.k8s.io/v1", "resource.k8s.io/v1/DeviceClass")
	cfg.Capabilities = &caps
	in := action.NewInstall(cfg)
	in.DryRunStrategy = action.DryRunClient
	in.ReleaseName = release[gpuChart].Name
	in.Namespace = release[gpuChart].Namespace
	in.Replace = true
	in.KubeVersion = &caps.KubeVersion
	in.APIVersions = caps.APIVersions
	r, err := in.RunWithContext(context.Background(), ch, oracleDeepCopy(vals))
	if err != nil {
		return nil, fmt.Errorf("render %s %s: %w", ch.Name(), ch.Metadata.AppVersion, err)
	}
	rel, ok := r.(*releasev1.Release)
	if !ok {
		t.Fatalf("unexpected Helm release type %T", r)
	}
	out := map[string]oracleObject{}
	// The NFD subchart's objects are left out: gpuctl's NFD release is held against it by its own oracle.
	subchart := "# Source: " + ch.Name() + "/charts/"
	add := func(manifest string, hook bool) {
		for _, doc := range strings.Split(manifest, "\n---") {
			if strings.Contains(doc, subchart) {
				continue
			}
			js, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatalf("%s %s renders YAML that does not parse: %v\n%s", ch.Name(), ch.Metadata.AppVersion, err, doc)
			}
			var obj map[string]any
			if err := utiljson.Unmarshal(js, &obj); err != nil {
				t.Fatal(err)
			}
			if obj == nil {
				continue
			}
			out[oracleKey(obj)] = oracleObject{obj: obj, hook: hook}
		}
	}
	add(rel.Manifest, false)
	for _, h := range rel.Hooks {
		if !strings.HasPrefix(h.Path, ch.Name()+"/charts/") {
			add(h.Manifest, true)
		}
	}
	return out, nil
}

func oracleKey(obj map[string]any) string {
	return fmt.Sprintf("%s/%s", obj["kind"], field[string](obj, "metadata", "name"))
}

func oracleDeepCopy(m map[string]any) map[string]any {
	js, err := utiljson.Marshal(m)
	if err != nil {
		panic(err)
	}
	var out map[string]any
	if err := yaml.Unmarshal(js, &out); err != nil {
		panic(err)
	}
	return out
}

// oracleCompare lists the differences between NVIDIA's objects and ours: objects only one side
// renders, then per object the parts that matter (see oracleParts).
func oracleCompare(nv, ours map[string]oracleObject) []oracleDifference {
	var diffs []oracleDifference
	for _, key := range slices.Sorted(maps.Keys(nv)) {
		if _, ok := ours[key]; !ok {
			what := "NVIDIA's chart renders it, ours does not"
			if nv[key].hook {
				what = "NVIDIA's chart runs it as a Helm hook, ours does not"
			}
			diffs = append(diffs, oracleDifference{object: key, detail: what})
		}
	}
	for _, key := range slices.Sorted(maps.Keys(ours)) {
		if _, ok := nv[key]; !ok {
			diffs = append(diffs, oracleDifference{object: key, detail: "ours renders it, NVIDIA's chart does not"})
		}
	}
	for _, key := range slices.Sorted(maps.Keys(nv)) {
		o, ok := ours[key]
		if !ok {
			continue
		}
		n := nv[key].obj
		switch kind, _ := n["kind"].(string); kind {
		case "ClusterRole", "Role":
			diffs = append(diffs, oracleRules(key, n, o.obj)...)
		default:
			for _, p := range oracleParts(kind) {
				oracleDiff(key, p, field[any](o.obj, oracleSplit(p)...), field[any](n, oracleSplit(p)...), &diffs)
			}
		}
	}
	return diffs
}

// oracleParts are the paths compared per kind: what the operator reads of its custom resources, and
// what decides how the operator runs. Metadata of custom resources is Helm's business and not compared.
func oracleParts(kind string) []string {
	switch kind {
	case "ClusterPolicy", "NVIDIADriver", "GPUCluster":
		return []string{"spec"}
	case "Deployment":
		return []string{
			"metadata.labels", "metadata.annotations", "spec.selector",
			"spec.template.metadata.labels", "spec.template.metadata.annotations",
			"spec.template.spec.serviceAccountName", "spec.template.spec.priorityClassName",
			"spec.template.spec.imagePullSecrets", "spec.template.spec.securityContext",
			"spec.template.spec.nodeSelector", "spec.template.spec.affinity", "spec.template.spec.tolerations",
			"spec.template.spec.volumes", "spec.template.spec.hostNetwork",
			"spec.template.spec.containers",
		}
	case "ConfigMap", "Secret":
		return []string{"data", "stringData"}
	case "ServiceAccount", "ClusterRoleBinding", "RoleBinding":
		return []string{"roleRef", "subjects"}
	}
	return []string{"spec", "data"}
}

// oracleSplit turns "spec.template.spec" into field's path.
func oracleSplit(p string) []any {
	var out []any
	for _, s := range strings.Split(p, ".") {
		out = append(out, s)
	}
	return out
}

// oracleDiff walks ours and NVIDIA's value at path and records every leaf that differs. An empty list
// equals an absent one: the operator's API types hold lists as Go slices, where nil and empty mean the
// same. Nothing else is treated as equal: an absent boolean can mean true to the operator.
func oracleDiff(object, path string, ours, nv any, out *[]oracleDifference) {
	if l, ok := ours.([]any); ok && len(l) == 0 {
		ours = nil
	}
	if l, ok := nv.([]any); ok && len(l) == 0 {
		nv = nil
	}
	om, ok1 := ours.(map[string]any)
	nm, ok2 := nv.(map[string]any)
	if ok1 && ok2 {
		keys := slices.Sorted(maps.Keys(om))
		for k := range nm {
			if _, ok := om[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			oracleDiff(object, oracleJoin(path, k), om[k], nm[k], out)
		}
		return
	}
	ol, ok1 := ours.([]any)
	nl, ok2 := nv.([]any)
	if ok1 && ok2 {
		for i := range max(len(ol), len(nl)) {
			var o, n any
			if i < len(ol) {
				o = ol[i]
			}
			if i < len(nl) {
				n = nl[i]
			}
			oracleDiff(object, fmt.Sprintf("%s[%d]", path, i), o, n, out)
		}
		return
	}
	if reflect.DeepEqual(ours, nv) {
		return
	}
	*out = append(*out, oracleDifference{object: object, path: path,
		detail: fmt.Sprintf("ours %s, NVIDIA's %s", oracleShow(ours), oracleShow(nv))})
}

func oracleJoin(path, key string) string {
	if strings.ContainsAny(key, "./") {
		return fmt.Sprintf("%s[%q]", path, key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// oracleShow prints a value with its type: "2" (string), 2 (int), absent.
func oracleShow(v any) string {
	if v == nil {
		return "absent"
	}
	js, _ := utiljson.Marshal(v)
	s := string(js)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	switch v.(type) {
	case string:
		return s + " (string)"
	case int64:
		return s + " (int)"
	case float64:
		return s + " (float)"
	case bool:
		return s + " (bool)"
	case []any:
		return s + " (list)"
	case map[string]any:
		return s + " (map)"
	}
	return fmt.Sprintf("%s (%T)", s, v)
}

// oracleRules reports every (API group, resource, verb) NVIDIA's role grants and ours does not: the
// operator creates per-operand roles and Kubernetes lets it grant only what it holds itself. Ours may
// grant more.
func oracleRules(object string, nv, ours map[string]any) []oracleDifference {
	grants := func(role map[string]any) map[string]bool {
		out := map[string]bool{}
		for _, r := range field[[]any](role, "rules") {
			for _, g := range field[[]any](r, "apiGroups") {
				for _, res := range field[[]any](r, "resources") {
					for _, v := range field[[]any](r, "verbs") {
						out[fmt.Sprintf("%v/%v %v", g, res, v)] = true
					}
				}
			}
			for _, u := range field[[]any](r, "nonResourceURLs") {
				for _, v := range field[[]any](r, "verbs") {
					out[fmt.Sprintf("url %v %v", u, v)] = true
				}
			}
		}
		return out
	}
	have, want := grants(ours), grants(nv)
	covered := func(g string) bool {
		if have[g] {
			return true
		}
		// A wildcard verb or resource of ours covers NVIDIA's.
		group, rest, _ := strings.Cut(g, "/")
		res, verb, _ := strings.Cut(rest, " ")
		return have[group+"/* "+verb] || have[group+"/"+res+" *"] || have["*/* *"]
	}
	var diffs []oracleDifference
	for _, g := range slices.Sorted(maps.Keys(want)) {
		if !covered(g) {
			group, rest, _ := strings.Cut(g, "/")
			res, verb, _ := strings.Cut(rest, " ")
			if group == "" {
				group = "core"
			}
			diffs = append(diffs, oracleDifference{object: object, path: "rules[" + group + "/" + res + "]",
				detail: "NVIDIA's grants " + verb + ", ours does not"})
		}
	}
	return diffs
}
