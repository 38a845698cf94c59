package charts

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/e2e/upstream"
	"github.com/gpuctl/gpuctl/internal/bundle"
)

// The NFD oracle: the node-feature-discovery chart that NVIDIA's GPU Operator chart of each release
// carries (deployments/gpu-operator/charts/node-feature-discovery of NVIDIA/gpu-operator at the release
// tag, a copy of kubernetes-sigs/node-feature-discovery's chart) is rendered next to ours with the same
// values, and every object is compared field by field. NVIDIA installs that chart as a subchart of its
// gpu-operator release ("gpu-operator"), gpuctl installs ours as a release of its own
// ("node-feature-discovery"), both in namespace gpu-operator, so object names are compared after the
// release prefix is normalised. Every difference must be fixed or be one of nfdOracleDeviations, each
// explained in docs/nfd-chart-deviations.md under its ID.

// nfdOracleRelease is how NVIDIA's chart installs its NFD subchart: with the parent's release.
var nfdOracleRelease = common.ReleaseOptions{Name: "gpu-operator", Namespace: "gpu-operator", IsInstall: true, Revision: 1}

// nfdOracleSection is the key of NVIDIA's NFD subchart in NVIDIA's gpu-operator values.yaml.
const nfdOracleSection = "node-feature-discovery"

// nfdOracleDeviation is one documented, deliberate difference between NVIDIA's NFD subchart and ours.
// A difference is allowed when every non-empty field matches it.
type nfdOracleDeviation struct {
	// id names the deviation in docs/nfd-chart-deviations.md.
	id string
	// releases are GPU Operator releases ("v26.3.3"); empty: all.
	releases []string
	// cases are oracle case names; empty: all.
	cases []string
	// object is a path.Match pattern over "Kind/normalised-name".
	object string
	// path is a prefix of the field path ("" matches the whole object, e.g. one chart renders it
	// and the other does not).
	path string
}

// nfdOracleOlder are the releases whose NFD subchart is NFD v0.18 (v0.18.3, v0.18.2); ours is written for
// v0.19.0 and runs their v0.18 image.
var nfdOracleOlder = []string{"v26.3.3", "v25.10.1"}

// nfdOracleDeviations is the machine-read list of docs/nfd-chart-deviations.md: every entry's id is
// explained there. A path ending in "*" matches every path it begins.
var nfdOracleDeviations = []nfdOracleDeviation{
	{id: "part-of-label", object: "*/*", path: "metadata.labels[app.kubernetes.io/part-of]"},
	{id: "chart-label", releases: nfdOracleOlder, object: "*/*", path: "metadata.labels[helm.sh/chart]"},

	{id: "post-delete-prune", object: "ServiceAccount/*-prune"},
	{id: "post-delete-prune", object: "ClusterRole/*-prune"},
	{id: "post-delete-prune", object: "ClusterRoleBinding/*-prune"},
	{id: "post-delete-prune", object: "Job/*-prune"},

	{id: "own-service-accounts", cases: []string{"gpuctl-defaults"}, object: "ServiceAccount/node-feature-discovery-worker"},
	{id: "own-service-accounts", cases: []string{"gpuctl-defaults"}, object: "ServiceAccount/node-feature-discovery-gc"},
	{id: "own-service-accounts", cases: []string{"gpuctl-defaults"}, object: "DaemonSet/node-feature-discovery-worker", path: "spec.template.spec.serviceAccountName"},
	{id: "own-service-accounts", cases: []string{"gpuctl-defaults"}, object: "Deployment/node-feature-discovery-gc", path: "spec.template.spec.serviceAccountName"},
	{id: "own-service-accounts", cases: []string{"gpuctl-defaults"}, object: "RoleBinding/node-feature-discovery-worker", path: "subjects"},
	{id: "own-service-accounts", cases: []string{"gpuctl-defaults"}, object: "ClusterRoleBinding/node-feature-discovery-gc", path: "subjects"},

	{id: "legacy-master-taint", releases: []string{"v25.10.1"}, cases: []string{"gpuctl-defaults"}, object: "DaemonSet/node-feature-discovery-worker", path: "spec.template.spec.tolerations"},

	{id: "older-nfd-feature-gate-default", releases: nfdOracleOlder, object: "Deployment/*-master", path: "spec.template.spec.containers[master].args{-feature-gates=NodeFeatureGroupAPI=false}"},
	{id: "older-nfd-feature-gate-default", releases: nfdOracleOlder, object: "DaemonSet/*-worker", path: "spec.template.spec.containers[worker].args{-feature-gates=NodeFeatureGroupAPI=false}"},
	{id: "older-nfd-leader-election", releases: nfdOracleOlder, object: "Deployment/*-master", path: "spec.template.spec.containers[master].args{-enable-leader-election}"},

	{id: "v019-values-on-older-nfd", releases: nfdOracleOlder, object: "*/*", path: "spec.template.metadata.labels"},
	{id: "v019-values-on-older-nfd", releases: nfdOracleOlder, object: "*/*", path: "spec.template.spec.hostUsers"},
	{id: "v019-values-on-older-nfd", releases: nfdOracleOlder, object: "*/*", path: "spec.template.spec.initContainers"},
	{id: "v019-values-on-older-nfd", releases: nfdOracleOlder, object: "NetworkPolicy/*"},
	{id: "v019-values-on-older-nfd", releases: nfdOracleOlder, object: "DaemonSet/*-worker", path: "spec.updateStrategy"},
	{id: "v019-values-on-older-nfd", releases: nfdOracleOlder, cases: []string{"feature-gates"}, object: "*/*", path: "spec.template.metadata.annotations[checksum/config]"},

	{id: "gc-port-flag", object: "Deployment/*-gc", path: "spec.template.spec.containers[gc].args{-port=*"},

	{id: "podmonitor-metadata", object: "PodMonitor/*", path: "metadata.labels"},
	{id: "podmonitor-metadata", object: "PodMonitor/*", path: "metadata.namespace"},
}

// nfdOracleDifference is one field that differs: ours and NVIDIA's are the decoded values (nil: absent).
type nfdOracleDifference struct {
	release, caseName, object, path string
	nvidia, ours                    any
}

func (d nfdOracleDifference) String() string {
	return fmt.Sprintf("%s %s: %s %s: NVIDIA %s, ours %s", d.release, d.caseName, d.object, d.path,
		nfdOracleShow(d.nvidia), nfdOracleShow(d.ours))
}

func (dev nfdOracleDeviation) matches(d nfdOracleDifference) bool {
	if len(dev.releases) > 0 && !slices.Contains(dev.releases, d.release) {
		return false
	}
	if len(dev.cases) > 0 && !slices.Contains(dev.cases, d.caseName) {
		return false
	}
	if ok, _ := path.Match(dev.object, d.object); !ok {
		return false
	}
	if prefix, ok := strings.CutSuffix(dev.path, "*"); ok {
		return strings.HasPrefix(d.path, prefix)
	}
	return dev.path == "" || d.path == dev.path || strings.HasPrefix(d.path, dev.path+".") ||
		strings.HasPrefix(d.path, dev.path+"[") || strings.HasPrefix(d.path, dev.path+"{")
}

// TestNFDChartMatchesNVIDIAsSubchart renders NVIDIA's NFD subchart of every release gpuctl installs and
// ours with the same values, and fails on any difference that is not a documented deviation, or on a
// documented deviation that no longer occurs.
func TestNFDChartMatchesNVIDIAsSubchart(t *testing.T) {
	used := make([]bool, len(nfdOracleDeviations))
	tested := 0
	for _, b := range bundle.List() {
		t.Run(b.Version, func(t *testing.T) {
			tree := upstream.TreeT(t, b.Version)
			nv := nfdOracleNVIDIAChart(t, tree)
			if nv.Metadata.AppVersion != b.NFD.Version {
				t.Fatalf("NVIDIA's chart of %s carries NFD %s, but the bundle pins the NFD image %s",
					b.Version, nv.Metadata.AppVersion, b.NFD.Version)
			}
			ours := mustLoad(t, nfdChart)
			pin := b.NFDValues()
			for _, c := range nfdOracleCases(t, tree) {
				t.Run(c.name, func(t *testing.T) {
					nvObjs := nfdOracleRender(t, nv, nfdOracleRelease, nfdOracleMerge(c.nvidia, pin))
					ourObjs := nfdOracleRender(t, ours, release[nfdChart], nfdOracleMerge(c.ours, pin))
					valuesOnly := nfdOracleChecksumValuesOnly(c.nvidia)
					from, to := nfdOracleFullname(nv, nfdOracleRelease, c.nvidia), nfdOracleFullname(ours, release[nfdChart], c.ours)
					for k, o := range nvObjs {
						nvObjs[k] = nfdOracleNormalise(o, from, to, true, valuesOnly)
					}
					for k, o := range ourObjs {
						ourObjs[k] = nfdOracleNormalise(o, "", "", false, valuesOnly)
					}
					// Keys are taken after normalisation.
					nvObjs, ourObjs = nfdOracleRekey(nvObjs), nfdOracleRekey(ourObjs)
					for _, d := range nfdOracleCompare(nvObjs, ourObjs) {
						d.release, d.caseName = b.Version, c.name
						i := slices.IndexFunc(nfdOracleDeviations, func(dev nfdOracleDeviation) bool { return dev.matches(d) })
						if i < 0 {
							t.Errorf("undocumented difference: %s", d)
							continue
						}
						used[i] = true
					}
				})
			}
			tested++
		})
	}
	if tested < len(bundle.List()) || t.Failed() {
		return // a skipped or failed release cannot prove an entry stale
	}
	for i, dev := range nfdOracleDeviations {
		if !used[i] {
			t.Errorf("deviation %s (%s %s) no longer occurs: remove it here and in docs/nfd-chart-deviations.md", dev.id, dev.object, dev.path)
		}
	}
}

// TestNFDDeviationsAreDocumented: every allowed difference is explained in docs/nfd-chart-deviations.md
// under its ID, and the document lists no ID the test does not know.
func TestNFDDeviationsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "nfd-chart-deviations.md"))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, dev := range nfdOracleDeviations {
		if ids[dev.id] {
			continue
		}
		ids[dev.id] = true
		if !strings.Contains(string(doc), "| `"+dev.id+"` |") {
			t.Errorf("deviation %s is not explained in docs/nfd-chart-deviations.md", dev.id)
		}
	}
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		id := strings.SplitN(strings.TrimPrefix(line, "| `"), "`", 2)[0]
		if !ids[id] {
			t.Errorf("docs/nfd-chart-deviations.md documents %s, which the oracle test does not allow", id)
		}
	}
}

// nfdOracleNVIDIAChart loads the NFD subchart from NVIDIA's source tree of one release.
func nfdOracleNVIDIAChart(t *testing.T, tree string) *chart.Chart {
	t.Helper()
	dir := filepath.Join(tree, "deployments", "gpu-operator", "charts", "node-feature-discovery")
	ch, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatalf("load %s: %v", dir, err)
	}
	return ch
}

// nfdOracleCase is one set of values: what NVIDIA's subchart gets (its part of a gpu-operator values
// file) and what gpuctl gives our chart for the same file.
type nfdOracleCase struct {
	name         string
	nvidia, ours map[string]any
}

// nfdOracleCases are, for one release:
//   - subchart-values: the subchart's own complete values.yaml, given to both charts as user values (so
//     ours must accept every key of it);
//   - nvidia-section: the node-feature-discovery section of NVIDIA's gpu-operator values.yaml, given to
//     both, as gpuctl passes it when a user installs with NVIDIA's values file;
//   - gpuctl-defaults: NVIDIA's chart with that section (a plain `helm install gpu-operator`) against
//     ours with no values at all (a plain `gpuctl install`);
//   - every testdata/nfd-oracle/*.yaml (values in the NFD chart's keys, as a user writes them under
//     node-feature-discovery:), merged over NVIDIA's section for both.
func nfdOracleCases(t *testing.T, tree string) []nfdOracleCase {
	t.Helper()
	read := func(p string) map[string]any {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		vals := map[string]any{}
		if err := yaml.Unmarshal(data, &vals); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return vals
	}
	chartValues := read(filepath.Join(tree, "deployments", "gpu-operator", "charts", "node-feature-discovery", "values.yaml"))
	section, ok := read(filepath.Join(tree, "deployments", "gpu-operator", "values.yaml"))[nfdOracleSection].(map[string]any)
	if !ok {
		t.Fatalf("NVIDIA's values.yaml has no %s section", nfdOracleSection)
	}
	out := []nfdOracleCase{
		{"subchart-values", chartValues, chartValues},
		{"nvidia-section", section, section},
		{"gpuctl-defaults", section, map[string]any{}},
	}
	files, err := filepath.Glob(filepath.Join("testdata", "nfd-oracle", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no values files under testdata/nfd-oracle")
	}
	for _, f := range files {
		vals := nfdOracleMerge(section, read(f))
		out = append(out, nfdOracleCase{strings.TrimSuffix(filepath.Base(f), ".yaml"), vals, vals})
	}
	return out
}

// nfdOracleMerge returns src merged over a copy of dst as Helm coalesces values: maps key by key,
// anything else replaced.
func nfdOracleMerge(dst, src map[string]any) map[string]any {
	out := nfdOracleCopy(dst)
	for k, v := range nfdOracleCopy(src) {
		sm, ok1 := v.(map[string]any)
		dm, ok2 := out[k].(map[string]any)
		if ok1 && ok2 {
			out[k] = nfdOracleMerge(dm, sm)
			continue
		}
		out[k] = v
	}
	return out
}

func nfdOracleCopy(m map[string]any) map[string]any {
	js, err := utiljson.Marshal(m)
	if err != nil {
		panic(err)
	}
	out := map[string]any{}
	if err := utiljson.Unmarshal(js, &out); err != nil {
		panic(err)
	}
	return out
}

// nfdOracleChecksumValuesOnly reports whether the values ask for config checksums of the values alone,
// which then must be equal; otherwise both charts hash their rendered ConfigMap, whose labels differ.
func nfdOracleChecksumValuesOnly(vals map[string]any) bool {
	on, _ := vals["checksumValuesOnly"].(bool)
	return on
}

// nfdOracleFullname is the object-name prefix a chart uses for these values.
func nfdOracleFullname(ch *chart.Chart, rel common.ReleaseOptions, vals map[string]any) string {
	if s, _ := vals["fullnameOverride"].(string); s != "" {
		return s
	}
	name := ch.Name()
	if s, _ := vals["nameOverride"].(string); s != "" {
		name = s
	}
	if strings.Contains(rel.Name, name) {
		return rel.Name
	}
	return rel.Name + "-" + name
}

// nfdOracleRender renders ch with user values vals as `helm install` would (schema validation
// included; hook templates are rendered like the others, their annotations say they are hooks) and
// decodes every object, with integers as int64 as the API server would read them.
func nfdOracleRender(t *testing.T, ch *chart.Chart, rel common.ReleaseOptions, vals map[string]any) map[string]map[string]any {
	t.Helper()
	top, err := util.ToRenderValues(ch, vals, rel, capabilities(t))
	if err != nil {
		t.Fatalf("values for %s %s: %v", ch.Name(), ch.Metadata.Version, err)
	}
	manifests, err := engine.Render(ch, top)
	if err != nil {
		t.Fatalf("render %s %s: %v", ch.Name(), ch.Metadata.Version, err)
	}
	out := map[string]map[string]any{}
	paths := make([]string, 0, len(manifests))
	for p := range manifests {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if !strings.HasSuffix(p, ".yaml") {
			continue
		}
		for _, doc := range strings.Split("\n"+manifests[p], "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			js, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatalf("%s %s: %s does not parse: %v\n%s", ch.Name(), ch.Metadata.Version, p, err, doc)
			}
			var obj map[string]any
			if err := utiljson.Unmarshal(js, &obj); err != nil {
				t.Fatal(err)
			}
			if obj == nil {
				continue
			}
			k := fmt.Sprintf("%s/%s", obj["kind"], field[string](obj, "metadata", "name"))
			if _, dup := out[k]; dup {
				t.Fatalf("%s %s renders %s twice", ch.Name(), ch.Metadata.Version, k)
			}
			out[k] = obj
		}
	}
	return out
}

// nfdOracleNormalise rewrites what must differ between the two installs: NVIDIA's subchart names its
// objects "<parent release>-node-feature-discovery-…" and labels them with the parent's release,
// ours "node-feature-discovery-…"; config checksums hash ConfigMaps whose labels differ. Nulls and
// empty maps and lists are dropped: Kubernetes reads them as absent.
func nfdOracleNormalise(obj map[string]any, fromPrefix, toPrefix string, nvidia, checksumValuesOnly bool) map[string]any {
	if fromPrefix == toPrefix {
		fromPrefix = ""
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch t := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, x := range t {
				if k == "app.kubernetes.io/instance" && x == nfdOracleRelease.Name && nvidia {
					x = release[nfdChart].Name
				}
				if k == "checksum/config" && !checksumValuesOnly {
					if s, _ := x.(string); s != "" {
						x = "<sha256 of the rendered ConfigMap>"
					}
				}
				if key, _ := t["key"].(string); k == "values" && key == "app.kubernetes.io/instance" && nvidia {
					if l, ok := x.([]any); ok && len(l) == 1 && l[0] == nfdOracleRelease.Name {
						x = []any{release[nfdChart].Name}
					}
				}
				if y := walk(x); y != nil {
					out[k] = y
				}
			}
			if len(out) == 0 {
				return nil
			}
			return out
		case []any:
			var out []any
			for _, x := range t {
				if y := walk(x); y != nil {
					out = append(out, y)
				}
			}
			if len(out) == 0 {
				return nil
			}
			return out
		case string:
			if fromPrefix != "" && (t == fromPrefix || strings.HasPrefix(t, fromPrefix+"-")) {
				return toPrefix + strings.TrimPrefix(t, fromPrefix)
			}
			return t
		default:
			return v
		}
	}
	out, _ := walk(obj).(map[string]any)
	return out
}

func nfdOracleRekey(objs map[string]map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, o := range objs {
		out[fmt.Sprintf("%s/%s", o["kind"], field[string](o, "metadata", "name"))] = o
	}
	return out
}

// nfdOracleCompare lists every difference between NVIDIA's objects and ours, keyed alike.
func nfdOracleCompare(nv, ours map[string]map[string]any) []nfdOracleDifference {
	keys := map[string]bool{}
	for k := range nv {
		keys[k] = true
	}
	for k := range ours {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []nfdOracleDifference
	for _, k := range sorted {
		n, o := nv[k], ours[k]
		switch {
		case n == nil:
			out = append(out, nfdOracleDifference{object: k, ours: "rendered"})
		case o == nil:
			out = append(out, nfdOracleDifference{object: k, nvidia: "rendered"})
		default:
			kind, _ := n["kind"].(string)
			if kind == "ClusterRole" || kind == "Role" {
				out = append(out, nfdOracleRules(k, n, o)...)
				n, o = nfdOracleWithout(n, "rules"), nfdOracleWithout(o, "rules")
			}
			nfdOracleDiff(k, "", n, o, &out)
		}
	}
	return out
}

func nfdOracleWithout(m map[string]any, key string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// nfdOracleRules compares RBAC rules as what they grant: one difference per permission
// (apiGroup/resource[/resourceName] verb) that only one side grants.
func nfdOracleRules(object string, nv, ours map[string]any) []nfdOracleDifference {
	grants := func(role map[string]any) map[string]bool {
		out := map[string]bool{}
		for _, r := range field[[]any](role, "rules") {
			names := field[[]any](r, "resourceNames")
			if len(names) == 0 {
				names = []any{""}
			}
			for _, g := range field[[]any](r, "apiGroups") {
				for _, res := range field[[]any](r, "resources") {
					for _, n := range names {
						for _, v := range field[[]any](r, "verbs") {
							p := fmt.Sprintf("%v/%v", g, res)
							if n != "" {
								p += fmt.Sprintf("/%v", n)
							}
							out[p+" "+fmt.Sprint(v)] = true
						}
					}
				}
			}
		}
		return out
	}
	n, o := grants(nv), grants(ours)
	var out []nfdOracleDifference
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for k := range n {
			if !yield(k) {
				return
			}
		}
		for k := range o {
			if !n[k] && !yield(k) {
				return
			}
		}
	}) {
		if n[p] != o[p] {
			d := nfdOracleDifference{object: object, path: "rules{" + p + "}"}
			if n[p] {
				d.nvidia = "granted"
			} else {
				d.ours = "granted"
			}
			out = append(out, d)
		}
	}
	return out
}

// nfdOracleDiff walks both values. Lists whose items are all maps with a name (containers, env,
// volumes, ports) are compared by name; container args as a set of flags (their order does not matter
// to nfd's flag parsing, and no flag is given twice); other lists by index.
func nfdOracleDiff(object, p string, nv, ours any, out *[]nfdOracleDifference) {
	if reflect.DeepEqual(nv, ours) {
		return
	}
	nm, ok1 := nv.(map[string]any)
	om, ok2 := ours.(map[string]any)
	if ok1 && ok2 {
		keys := map[string]bool{}
		for k := range nm {
			keys[k] = true
		}
		for k := range om {
			keys[k] = true
		}
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range keys {
				if !yield(k) {
					return
				}
			}
		}) {
			nfdOracleDiff(object, nfdOracleJoin(p, k), nm[k], om[k], out)
		}
		return
	}
	nl, ok1 := nv.([]any)
	ol, ok2 := ours.([]any)
	if ok1 && ok2 {
		if strings.HasSuffix(p, ".args") {
			// One difference per flag only one side passes: "args{-enable-leader-election}".
			ns, os := nfdOracleStrings(nl), nfdOracleStrings(ol)
			for _, a := range ns {
				if !slices.Contains(os, a) {
					*out = append(*out, nfdOracleDifference{object: object, path: p + "{" + a + "}", nvidia: "passed"})
				}
			}
			for _, a := range os {
				if !slices.Contains(ns, a) {
					*out = append(*out, nfdOracleDifference{object: object, path: p + "{" + a + "}", ours: "passed"})
				}
			}
			return
		}
		if nn, on := nfdOracleNamed(nl), nfdOracleNamed(ol); nn != nil && on != nil {
			names := map[string]bool{}
			for k := range nn {
				names[k] = true
			}
			for k := range on {
				names[k] = true
			}
			for _, k := range slices.Sorted(func(yield func(string) bool) {
				for k := range names {
					if !yield(k) {
						return
					}
				}
			}) {
				nfdOracleDiff(object, p+"["+k+"]", nn[k], on[k], out)
			}
			return
		}
		if len(nl) == len(ol) {
			for i := range nl {
				nfdOracleDiff(object, fmt.Sprintf("%s[%d]", p, i), nl[i], ol[i], out)
			}
			return
		}
	}
	*out = append(*out, nfdOracleDifference{object: object, path: p, nvidia: nv, ours: ours})
}

func nfdOracleJoin(p, key string) string {
	if strings.ContainsAny(key, "./") {
		key = "[" + key + "]"
		return p + key
	}
	if p == "" {
		return key
	}
	return p + "." + key
}

func nfdOracleStrings(l []any) []string {
	out := make([]string, len(l))
	for i, x := range l {
		out[i] = fmt.Sprint(x)
	}
	return out
}

// nfdOracleNamed indexes a list of maps by their "name", or returns nil when it is not such a list.
func nfdOracleNamed(l []any) map[string]any {
	out := map[string]any{}
	for _, x := range l {
		m, ok := x.(map[string]any)
		if !ok {
			return nil
		}
		n, ok := m["name"].(string)
		if !ok || n == "" {
			return nil
		}
		if _, dup := out[n]; dup {
			return nil
		}
		out[n] = m
	}
	return out
}

func nfdOracleShow(v any) string {
	if v == nil {
		return "absent"
	}
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	js, err := utiljson.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(js)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// TestNFDValuesCoverUpstreamKeys: every key of the values.yaml of NVIDIA's NFD subchart, in every release
// gpuctl installs, is a key of our values.yaml too, where it is commented, not only accepted by the
// schema. Free-form maps (configs, feature gates, resources and the like) are not descended into.
func TestNFDValuesCoverUpstreamKeys(t *testing.T) {
	ours := map[string]any{}
	data, err := os.ReadFile(filepath.Join(nfdChart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &ours); err != nil {
		t.Fatal(err)
	}
	freeForm := map[string]bool{"config": true, "featureGates": true, "resources": true, "securityContext": true,
		"podSecurityContext": true, "affinity": true, "nodeSelector": true, "labels": true, "annotations": true,
		"deploymentAnnotations": true, "daemonsetAnnotations": true, "updateStrategy": true}
	var missing func(release, prefix string, up, ours map[string]any)
	missing = func(release, prefix string, up, ours map[string]any) {
		for k, v := range up {
			p := strings.TrimPrefix(prefix+"."+k, ".")
			o, ok := ours[k]
			if !ok {
				t.Errorf("%s: our values.yaml has no %s", release, p)
				continue
			}
			um, ok1 := v.(map[string]any)
			om, ok2 := o.(map[string]any)
			if ok1 && !freeForm[k] {
				if !ok2 {
					t.Errorf("%s: %s is a map upstream, %T in our values.yaml", release, p, o)
					continue
				}
				missing(release, p, um, om)
			}
		}
	}
	for _, b := range bundle.List() {
		t.Run(b.Version, func(t *testing.T) {
			tree := upstream.TreeT(t, b.Version)
			missing(b.Version, "", nfdOracleNVIDIAChart(t, tree).Values, ours)
		})
	}
}

// TestNFDRefusesTopologyUpdaterCRDs: the NodeResourceTopology CRD is not gpuctl's to template, so values
// that ask for it fail with how to get it, instead of a topology updater that cannot start.
func TestNFDRefusesTopologyUpdaterCRDs(t *testing.T) {
	vals := map[string]any{"topologyUpdater": map[string]any{"enable": true, "createCRDs": true}}
	_, err := render(t, nfdChart, vals, capabilities(t))
	if err == nil || !strings.Contains(err.Error(), "topologyUpdater.createCRDs") || !strings.Contains(err.Error(), "noderesourcetopologies-crd") {
		t.Fatalf("render error = %v, want one naming topologyUpdater.createCRDs and how to apply the CRD", err)
	}
	vals["topologyUpdater"].(map[string]any)["createCRDs"] = false
	objs := objects(t, mustRender(t, nfdChart, vals, capabilities(t)))
	ds := find(t, objs, "DaemonSet", "node-feature-discovery-topology-updater")
	if got := field[string](ds, "spec", "template", "spec", "serviceAccountName"); got != "node-feature-discovery-topology-updater" {
		t.Errorf("topology updater runs as %q", got)
	}
	find(t, objs, "ClusterRoleBinding", "node-feature-discovery-topology-updater")
	find(t, objs, "ConfigMap", "node-feature-discovery-topology-updater-conf")
}

// TestNFDBranchesOnTheImageVersion: the few things NFD v0.18 lacks follow image.tag, which gpuctl pins
// per GPU Operator release.
func TestNFDBranchesOnTheImageVersion(t *testing.T) {
	tests := []struct {
		tag          string
		ownerRefs    bool
		gcNodesProxy bool
	}{
		{"", true, false},
		{"v0.19.0", true, false},
		{"v0.19.0-minimal", true, false},
		{"v0.20.1", true, false},
		{"master", true, false},
		{"v0.18.3", false, true},
		{"v0.18.2-minimal", false, true},
	}
	for _, tt := range tests {
		t.Run("tag "+tt.tag, func(t *testing.T) {
			vals := map[string]any{"image": map[string]any{"tag": tt.tag}, "worker": map[string]any{"ownerRefs": []any{"node", "pod"}}}
			objs := objects(t, mustRender(t, nfdChart, vals, capabilities(t)))
			args := field[[]any](find(t, objs, "DaemonSet", "node-feature-discovery-worker"), "spec", "template", "spec", "containers", 0, "args")
			if got := slices.Contains(args, any("-owner-refs=node,pod")); got != tt.ownerRefs {
				t.Errorf("worker args %v: -owner-refs passed = %t, want %t", args, got, tt.ownerRefs)
			}
			hasWorkerRole := slices.ContainsFunc(objs, func(o map[string]any) bool {
				return o["kind"] == "ClusterRole" && field[string](o, "metadata", "name") == "node-feature-discovery-worker"
			})
			if hasWorkerRole != tt.ownerRefs {
				t.Errorf("worker ClusterRole rendered = %t, want %t", hasWorkerRole, tt.ownerRefs)
			}
			gc := find(t, objs, "ClusterRole", "node-feature-discovery-gc")
			if got := allows(rules(gc), rule{"", "nodes/proxy", "get"}); got != tt.gcNodesProxy {
				t.Errorf("gc may get nodes/proxy = %t, want %t", got, tt.gcNodesProxy)
			}
		})
	}
}
