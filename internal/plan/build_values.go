package plan

import (
	"fmt"
	"strings"

	"github.com/gpuctl/gpuctl/internal/detect"
)

// helmReleases are the Helm path's releases; monitoring is nil unless --monitoring installs it.
type helmReleases struct {
	nfd, operator, monitoring *Release
	// sharing is the node-labels step of --sharing (nil without it).
	sharing *Step
	// mig is the node-labels step of --mig (nil without it).
	mig *Step
}

// releaseLayers are the values layers of the operator and NFD releases, lowest precedence first.
type releaseLayers struct {
	op, nfd []Layer
}

// add adds a layer to the operator release, and to NFD's where nfd has values.
func (l *releaseLayers) add(source string, op, nfd map[string]any) {
	l.op = append(l.op, Layer{Source: source, Values: normalized(op)})
	if len(nfd) > 0 {
		l.nfd = append(l.nfd, Layer{Source: source, Values: normalized(nfd)})
	}
}

// addSplit adds user values: their node-feature-discovery section goes to NFD, the rest to the operator.
func (l *releaseLayers) addSplit(source string, values map[string]any) {
	op, nfd := split(values)
	l.add(source, op, nfd)
}

// helmReleases layers the NFD and operator releases' values, lowest precedence first: the operator
// bundle's image pins, the profile, the detected facts, tolerations of the GPU nodes' own taints
// (--tolerate-existing-taints), the values of a release --adopt takes over, gpuctl's flags
// (addFlagLayers), the -f files, --set. It refuses a bundle the operator chart is not loaded for,
// and plans the monitoring release where --monitoring can have one.
func (b *builder) helmReleases(decision TaintDecision) (helmReleases, error) {
	var l releaseLayers
	if bundle := b.in.Bundle; bundle != nil {
		l.add("operator bundle "+bundle.Version, bundle.Operator, bundle.NFD)
		if loaded := b.in.Charts[OperatorRelease].AppVersion; bundle.Version != loaded {
			return helmReleases{}, fmt.Errorf("plan: the gpu-operator chart is loaded for %s, not for operator release %s", loaded, bundle.Version)
		}
	}
	b.addProfileLayers(&l)
	addFactLayers(&l, b.det, decision)
	if b.o.TolerateExistingTaints {
		addExistingTaintLayers(&l, b.det)
	}
	adopted := b.addAdoptedLayer(&l)
	rels, pre, err := b.addFlagLayers(&l)
	if err != nil {
		return helmReleases{}, err
	}
	for _, f := range b.o.Files {
		l.addSplit("file "+f.Source, f.Values)
	}
	if len(b.o.Set) > 0 {
		l.addSplit("--set", b.o.Set)
	}
	if b.o.DRA {
		if err := refuseDRAValues(flatten(l.op)); err != nil {
			return helmReleases{}, err
		}
	}
	if pre != nil && at(flatten(l.op), "driver", "enabled") == false {
		return helmReleases{}, &PrecompiledError{"the operator installs no driver here (driver.enabled=false: the " + b.prof.Name + " profile, a host driver, or your values): drop --precompiled"}
	}
	rels.nfd = chartRelease(NFDRelease, b.o.Namespace, b.in.Charts[NFDRelease], l.nfd)
	rels.operator = chartRelease(OperatorRelease, b.o.Namespace, b.in.Charts[OperatorRelease], l.op)
	b.p.Adoption = b.adoption(adopted, rels.operator)
	b.keepSubchart(rels.operator)
	return rels, nil
}

// addFlagLayers adds the layers of gpuctl's own flags, in order: --monitoring, --sharing, --mig,
// --precompiled, --dra. It returns the releases and steps they plan, and --precompiled's layer (nil
// without it).
func (b *builder) addFlagLayers(l *releaseLayers) (helmReleases, *Layer, error) {
	var rels helmReleases
	if b.o.Monitoring {
		rels.monitoring = b.addMonitoringLayer(l)
	}
	layer, step, err := b.sharing()
	if err != nil {
		return rels, nil, err
	}
	if layer != nil {
		l.op = append(l.op, *layer)
	}
	rels.sharing = step
	layer, step, err = b.mig()
	if err != nil {
		return rels, nil, err
	}
	if layer != nil {
		l.op = append(l.op, *layer)
	}
	rels.mig = step
	pre, err := b.precompiled()
	if err != nil {
		return rels, nil, err
	}
	if pre != nil {
		l.op = append(l.op, *pre)
	}
	if b.o.DRA {
		l.op = append(l.op, Layer{Source: DRASource, Values: draValues()})
	}
	return rels, pre, nil
}

// chartRelease is a release of an embedded chart with the values its layers flatten to.
func chartRelease(name, ns string, chart ChartInfo, layers []Layer) *Release {
	return &Release{Name: name, Namespace: ns, Chart: chart.Name, ChartVersion: chart.Version, AppVersion: chart.AppVersion, Layers: layers, Values: flatten(layers)}
}

// addProfileLayers adds the profile's values; NFD gets a profile layer even when it is empty.
func (b *builder) addProfileLayers(l *releaseLayers) {
	opValues, nfdValues := split(b.prof.Values)
	opValues, nfdValues = clone(opValues), merge(nfdValues, b.prof.NFD)
	// Platform objects in the profile (extraObjects, e.g. GKE's ResourceQuota) are applied by gpuctl
	// before NFD, which needs them too; Helm must not also own them.
	delete(opValues, "extraObjects")
	source := "profile " + b.prof.Name
	l.op = append(l.op, Layer{Source: source, Values: normalized(opValues)})
	l.nfd = append(l.nfd, Layer{Source: source, Values: normalized(nfdValues)})
}

// addFactLayers adds the values that follow from what detection found (facts), each layer saying why.
func addFactLayers(l *releaseLayers, det *detect.Result, decision TaintDecision) {
	opFacts, nfdFacts, why := facts(det, decision)
	l.op = append(l.op, Layer{Source: "detected: " + strings.Join(why, "; "), Values: normalized(opFacts)})
	if len(nfdFacts) > 0 {
		l.nfd = append(l.nfd, Layer{Source: "detected: " + tolerationsWhy, Values: normalized(nfdFacts)})
	}
}

// addExistingTaintLayers adds tolerations of the GPU nodes' own taints that the values so far do not
// tolerate, to each release that lacks some.
func addExistingTaintLayers(l *releaseLayers, det *detect.Result) {
	opTols, nfdTols := existingTaintLayers(det, flatten(l.op), flatten(l.nfd))
	if len(opTols.Values) > 0 {
		l.op = append(l.op, opTols)
	}
	if len(nfdTols.Values) > 0 {
		l.nfd = append(l.nfd, nfdTols)
	}
}

// addMonitoringLayer asks the operator for its ServiceMonitors where the cluster can take them, warns
// where it cannot, and returns the monitoring release to install (nil for none).
func (b *builder) addMonitoringLayer(l *releaseLayers) *Release {
	values, rel, warning := monitoring(b.det, b.in.Charts[MonitoringRelease], b.in.Charts[OperatorRelease].AppVersion, b.o.Namespace)
	if warning != "" {
		b.warn(warning)
	}
	if values != nil {
		l.op = append(l.op, Layer{Source: MonitoringSource, Values: values})
	}
	return rel
}

// facts are the values that follow from what detection found: above the profile, below the user's.
func facts(det *detect.Result, d TaintDecision) (op, nfd map[string]any, why []string) {
	op, nfd = map[string]any{}, map[string]any{}
	set(op, false, "nfd", "enabled")
	why = append(why, "NFD is its own release")
	if n := len(det.GPUNodes); n > 0 {
		withDriver := 0
		for _, g := range det.GPUNodes {
			if g.HostDriver != "" {
				withDriver++
			}
		}
		if withDriver == n {
			set(op, false, "driver", "enabled")
			why = append(why, "every GPU node has a host driver")
		}
	}
	if needsTolerations(det, d) {
		op = merge(op, operatorTolerations())
		nfd = merge(nfd, nfdTolerations())
		why = append(why, tolerationsWhy+", so the operator tolerates the taint")
	}
	if d.Taint && d.Policy {
		set(op, true, PolicyValue, "enabled")
		why = append(why, "the API server does not add the GPU toleration to pods that request GPUs and serves MutatingAdmissionPolicy, so gpuctl's policy adds it")
	}
	return op, nfd, why
}

// tolerationsWhy is the detected fact behind the operator's and NFD master/gc's toleration.
const tolerationsWhy = "every schedulable worker is a GPU node"

// needsTolerations: the operator Deployment and NFD master/gc (which tolerate only the control plane)
// must tolerate the GPU taint when it is there, or going to be, and every schedulable worker is a GPU
// node.
func needsTolerations(det *detect.Result, d TaintDecision) bool {
	tainted := d.Taint
	for _, n := range det.GPUNodes {
		tainted = tainted || n.Tainted
	}
	return tainted && (det.Scheduling.AllWorkersGPU || det.Scheduling.AllSchedulableGPU)
}

// controlPlaneToleration is the toleration the operator and NFD master carry by default
// (NVIDIA/gpu-operator deployments/gpu-operator/templates/operator.yaml@v26.7.0; NVIDIA/gpu-operator
// deployments/gpu-operator/values.yaml@v26.7.0); setting tolerations replaces the list, so it is repeated.
func controlPlaneToleration() map[string]any {
	return map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"}
}

// gpuToleration tolerates gpuctl's GPU taint, whatever its value.
func gpuToleration() map[string]any {
	return map[string]any{"key": TaintKey, "operator": "Exists", "effect": TaintEffect}
}

// operatorTolerations are operator values: the operator Deployment tolerates the control plane and the GPU taint.
func operatorTolerations() map[string]any {
	return map[string]any{"operator": map[string]any{"tolerations": []any{controlPlaneToleration(), gpuToleration()}}}
}

// nfdTolerations are NFD values: NFD master and gc tolerate the control plane and the GPU taint.
func nfdTolerations() map[string]any {
	return map[string]any{
		"master": map[string]any{"tolerations": []any{controlPlaneToleration(), gpuToleration()}},
		"gc":     map[string]any{"tolerations": []any{controlPlaneToleration(), gpuToleration()}},
	}
}
