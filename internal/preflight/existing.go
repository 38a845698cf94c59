package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// ownSubscription reports whether an OLM subscription is the one gpuctl's OpenShift plan makes
// (NVIDIA's certified operator in nvidia-gpu-operator) and gpuctl made it: applied by a Helm release
// with gpuctl's label.
func ownSubscription(env *Env, s *detect.Subscription) bool {
	return s != nil && s.Gpuctl && env.Plan != nil && env.Plan.Step("release-gpu-operator-certified") != nil &&
		s.Namespace == plan.OpenShiftOperatorNS && s.Package == plan.OperatorPackage
}

// ours reports whether a Helm release is gpuctl's own: the name gpuctl gives it, in gpuctl's namespace,
// and proven gpuctl's by its release label (detect.ManagedReleaseLabel), or taken over by --adopt
// (the plan's Adoption). gpuctl upgrades its own releases and leaves everything else alone: a release
// of the same name that someone else installed is theirs.
func ours(env *Env, h *detect.HelmRelease, name string) bool {
	if h == nil || h.Name != name || h.Namespace != env.Namespace {
		return false
	}
	return h.Gpuctl || adopted(env, h)
}

// adopted: the plan takes h over (--adopt).
func adopted(env *Env, h *detect.HelmRelease) bool {
	a := (*plan.Adoption)(nil)
	if env.Plan != nil {
		a = env.Plan.Adoption
	}
	return a != nil && h != nil && a.Release == h.Name && a.Namespace == h.Namespace
}

func describeRelease(h *detect.HelmRelease) string {
	s := fmt.Sprintf("Helm release %s/%s", h.Namespace, h.Name)
	if h.Status != "" {
		s += " (" + h.Status
		if h.ChartVersion != "" {
			s += ", chart " + h.ChartVersion
		}
		s += ")"
	}
	return s
}

// checkExistingOperator: no GPU operator other than gpuctl's own release. Two operators would fight
// over the same ClusterPolicy and operands; gpuctl will not adopt one installed by another tool.
func checkExistingOperator(_ context.Context, env *Env) Result {
	if r, ok := needDetection(env); !ok {
		return r
	}
	op := env.Detection.Existing.GPUOperator
	if !op.Present {
		return pass("none")
	}
	if ours(env, op.Helm, plan.OperatorRelease) && op.OLM == nil {
		if adopted(env, op.Helm) {
			return pass(describeRelease(op.Helm) + ": not gpuctl's, taken over with --adopt; the install upgrades it, keeping its values (the plan lists what changes)")
		}
		return pass(describeRelease(op.Helm) + ": gpuctl's own (its " + detect.ManagedReleaseLabel + " label), the install upgrades it")
	}
	if ownSubscription(env, op.OLM) {
		return pass(fmt.Sprintf("OLM subscription %s/%s: gpuctl's own, the install keeps it", op.OLM.Namespace, op.OLM.Name))
	}
	var found []string
	hint := "uninstall it first, or keep managing it with the tool that installed it"
	switch {
	case op.OLM != nil:
		found = append(found, fmt.Sprintf("OLM subscription %s/%s (package %s)", op.OLM.Namespace, op.OLM.Name, op.OLM.Package))
		hint = fmt.Sprintf("it is managed by OLM: manage it there, or delete the subscription and its CSV in namespace %s first", op.OLM.Namespace)
	case op.Helm != nil:
		found = append(found, describeRelease(op.Helm)+" without gpuctl's release label "+detect.ManagedReleaseLabel)
		hint = plan.AdoptHint(op.Helm, env.Namespace)
	}
	if op.Deployment != nil {
		d := op.Deployment
		s := fmt.Sprintf("Deployment %s/%s", d.Namespace, d.Name)
		if d.ManagedBy != "" {
			s += " (" + d.ManagedBy + ")"
		}
		found = append(found, s)
	}
	return fail("a GPU operator that gpuctl did not install is present: "+strings.Join(found, ", "), hint)
}

// checkExistingClusterPolicy: the ClusterPolicy gpuctl's chart renders will be the one the operator
// honours. The operator reconciles only the oldest ClusterPolicy and ignores the rest (NVIDIA/gpu-operator
// controllers/clusterpolicy_controller.go@v26.7.0), and Helm will not take over a ClusterPolicy it did not create.
func checkExistingClusterPolicy(_ context.Context, env *Env) Result {
	if r, ok := needDetection(env); !ok {
		return r
	}
	e := env.Detection.Existing
	if len(e.ClusterPolicies) == 0 {
		return pass("none")
	}
	var names []string
	for _, cp := range e.ClusterPolicies {
		s := cp.Name
		if cp.State != "" {
			s += " (" + cp.State + ")"
		}
		names = append(names, s)
	}
	list := strings.Join(names, ", ")
	ownOperator := ours(env, e.GPUOperator.Helm, plan.OperatorRelease) || ownSubscription(env, e.GPUOperator.OLM)
	policy := plan.ClusterPolicyName
	if env.Plan != nil {
		if s := env.Plan.Step("wait-clusterpolicy"); s != nil && s.Target != "" {
			policy = s.Target
		}
	}
	switch {
	case e.GPUOperator.Present && !ownOperator:
		return fail("ClusterPolicy "+list+" belongs to the GPU operator that is already installed",
			"see the existing-operator check: remove that operator and its ClusterPolicy first")
	case !ownOperator:
		return fail("ClusterPolicy "+list+" exists without a GPU operator (left over from an earlier install?): the operator honours only the oldest ClusterPolicy, and Helm will not take one over",
			"delete it: kubectl delete clusterpolicy "+e.ClusterPolicies[0].Name)
	case e.ActiveClusterPolicy != policy:
		return fail(fmt.Sprintf("ClusterPolicy %s is older than gpuctl's %s, so the operator honours it and ignores gpuctl's", e.ActiveClusterPolicy, policy),
			"delete it: kubectl delete clusterpolicy "+e.ActiveClusterPolicy)
	case len(e.ClusterPolicies) > 1:
		var others []string
		for _, cp := range e.ClusterPolicies[1:] {
			others = append(others, cp.Name)
		}
		return warn("besides gpuctl's "+policy+", ClusterPolicy "+strings.Join(others, ", ")+" exists; the operator ignores it",
			"delete it to avoid confusion: kubectl delete clusterpolicy "+strings.Join(others, " "))
	}
	return pass(list + ": gpuctl's own, the install updates it")
}

// checkExistingNFD: NFD runs at most once (NVIDIA/gpu-operator#87, #1038). One someone else installed is used, not
// duplicated.
func checkExistingNFD(_ context.Context, env *Env) Result {
	if r, ok := needDetection(env); !ok {
		return r
	}
	n := env.Detection.Existing.NFD
	if !n.Present {
		if n.LabelledNodes > 0 {
			return pass(fmt.Sprintf("none runs, though %s labels of an earlier one; gpuctl installs NFD", quantity(n.LabelledNodes, "node carries", "nodes carry")))
		}
		return pass("none; gpuctl installs NFD")
	}
	if len(n.Namespaces) > 1 {
		return warn("NFD runs in more than one namespace ("+strings.Join(n.Namespaces, ", ")+"): duplicate NFDs fight over the same node labels",
			"uninstall all but one; gpuctl then uses the one that is left")
	}
	if ours(env, n.Helm, plan.NFDRelease) {
		return pass(describeRelease(n.Helm) + ": gpuctl's own, the install upgrades it")
	}
	if adopted(env, n.Helm) && n.OLM == nil {
		return pass("NFD runs as the subchart of " + describeRelease(n.Helm) + ", which --adopt takes over: it keeps running as it is, outside the release (its objects marked helm.sh/resource-policy: keep), and gpuctl uses it")
	}
	if s := n.OLM; s != nil && s.Gpuctl && env.Plan != nil && s.Namespace == plan.OpenShiftNFDNS && s.Package == plan.NFDPackage {
		if st := env.Plan.Step("release-nfd-operator"); st != nil && st.Skip == "" {
			return pass(fmt.Sprintf("OLM subscription %s/%s: gpuctl's own, the install keeps it", s.Namespace, s.Name))
		}
	}
	var where string
	switch {
	case n.Helm != nil:
		where = describeRelease(n.Helm)
	case n.OLM != nil:
		where = fmt.Sprintf("OLM subscription %s/%s", n.OLM.Namespace, n.OLM.Name)
	case len(n.Namespaces) > 0:
		where = "namespace " + n.Namespaces[0]
	default:
		where = "found by its workloads"
	}
	return warn("NFD is already installed ("+where+"): gpuctl uses it and does not install its own",
		"gpuctl waits for it to label GPU nodes feature.node.kubernetes.io/pci-10de.present=true; if that never comes, its PCI device config must include NVIDIA's classes (0300, 0302)")
}

// checkDevicePlugin: no NVIDIA device plugin other than the GPU operator's runs on GPU nodes. Two device
// plugins advertise nvidia.com/gpu on the same node and conflict; GKE runs its own on GPU
// pools unless they are created with gke-no-default-nvidia-gpu-device-plugin=true
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html).
func checkDevicePlugin(_ context.Context, env *Env) Result {
	if r, ok := needDetection(env); !ok {
		return r
	}
	d := env.Detection
	var gpuNames []string
	for _, n := range d.GPUNodes {
		gpuNames = append(gpuNames, n.Name)
	}
	var lines []string
	var hints []string
	for _, dp := range d.Existing.DevicePlugins {
		if dp.Provider == "gpu-operator" {
			continue // the operator's own: see existing-operator
		}
		on := 0
		for _, n := range dp.Nodes {
			if slices.Contains(gpuNames, n) {
				on++
			}
		}
		if on == 0 && dp.Desired == 0 {
			continue
		}
		where := quantity(on, "GPU node", "GPU nodes")
		if on == 0 {
			where = quantity(int(dp.Desired), "node", "nodes")
		}
		line := fmt.Sprintf("DaemonSet %s/%s runs on %s", dp.Namespace, dp.Name, where)
		if dp.ManagedBy != "" {
			line += " (" + dp.ManagedBy + ")"
		}
		lines = append(lines, line)
		switch {
		case dp.Provider == "gke":
			hints = append(hints, "GKE runs its own device plugin on GPU pools: recreate the node pool with --node-labels=gke-no-default-nvidia-gpu-device-plugin=true (and --accelerator …,gpu-driver-version=disabled)")
		case strings.HasPrefix(dp.ManagedBy, "helm release "):
			rel := strings.TrimPrefix(dp.ManagedBy, "helm release ")
			ns, name, _ := strings.Cut(rel, "/")
			hints = append(hints, fmt.Sprintf("uninstall it (helm uninstall %s -n %s): the GPU operator runs its own device plugin", name, ns))
		default:
			hints = append(hints, fmt.Sprintf("delete it (kubectl delete daemonset %s -n %s): the GPU operator runs its own device plugin", dp.Name, dp.Namespace))
		}
	}
	if len(lines) == 0 {
		return pass("none besides the GPU operator's")
	}
	return fail("another NVIDIA device plugin would run next to the GPU operator's:\n"+strings.Join(lines, "\n"), strings.Join(slices.Compact(hints), "; "))
}
