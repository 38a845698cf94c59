package preflight

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/internal/distro"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
)

// GPUWorkCheck is the ID of the check that refuses a run which would take GPUs away from the pods
// holding them; --force skips it.
const GPUWorkCheck = "gpu-work"

// disruptions are why a run takes the GPUs of nodes away from the pods that hold them: every node's
// (a switch between the device-plugin and the DRA stack), and each node's (MIG manager repartitions
// it, the device plugin advertises it anew).
type disruptions struct {
	every string
	nodes map[string][]string
}

func (d disruptions) empty() bool { return d.every == "" && len(d.nodes) == 0 }

// on is why the run disturbs node's GPUs ("" when it does not).
func (d disruptions) on(node string) string {
	why := d.nodes[node]
	if d.every != "" {
		why = append([]string{d.every}, why...)
	}
	return strings.Join(why, "; ")
}

func (d *disruptions) add(node, why string) {
	if d.nodes == nil {
		d.nodes = map[string][]string{}
	}
	d.nodes[node] = append(d.nodes[node], why)
}

// checkGPUWork fails when the run would take GPUs away from pods that hold them: a new MIG config on
// a node (MIG manager resets its GPUs, and on GKE reboots it: WITH_REBOOT), a sharing change that makes
// the device plugin advertise a node's GPUs anew, or a switch between the device-plugin and the DRA
// stack (every GPU pod). It names each pod and its node, and how to move the work off first; --force
// skips it.
func checkGPUWork(ctx context.Context, env *Env) Result {
	if r, ok := needPlan(env); !ok {
		return r
	}
	if r, ok := needDetection(env); !ok {
		return r
	}
	nodes, err := env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fail("cannot list the nodes to see whose GPUs the run resets: "+err.Error(), "grant list on nodes, or run with --force to go on without looking")
	}
	d := planDisruptions(env, nodes.Items)
	if d.empty() {
		return pass("the run resets no GPU and takes none away")
	}
	// Pods that ended hold nothing; the phase is filtered again below, for servers (and fakes) that
	// ignore the selector.
	pods, err := env.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"})
	if err != nil {
		return fail("cannot list the pods to find those holding GPUs: "+err.Error(), "grant list on pods, or run with --force to go on without looking")
	}
	var claims []resourcev1.ResourceClaim
	if slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return len(p.Spec.ResourceClaims) > 0 }) {
		list, err := env.Kube.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		switch {
		case kube.Absent(err):
			// No resource.k8s.io/v1: no claim holds a GPU.
		case err != nil:
			return fail("cannot list the ResourceClaims to find pods holding GPUs: "+err.Error(), "grant list on resourceclaims, or run with --force to go on without looking")
		default:
			claims = list.Items
		}
	}
	holders := gpuHolders(d, pods.Items, claims, env.Namespace)
	if len(holders) == 0 {
		return pass("no pod holds a GPU the run takes away (" + d.summary() + ")")
	}
	var lines []string
	var drained []string
	for _, h := range holders {
		lines = append(lines, fmt.Sprintf("%s/%s on node %s (%s): %s", h.Namespace, h.Name, h.Node, h.What, d.on(h.Node)))
		if !slices.Contains(drained, h.Node) {
			drained = append(drained, h.Node)
		}
	}
	count := fmt.Sprintf("%d pods", len(holders))
	if len(holders) == 1 {
		count = "a pod"
	}
	msg := fmt.Sprintf("the run would stop %s holding GPUs:\n%s", count, strings.Join(lines, "\n"))
	var drains []string
	for _, n := range drained {
		drains = append(drains, "kubectl drain "+n+" --ignore-daemonsets --delete-emptydir-data")
	}
	hint := "move the work off first: " + strings.Join(drains, "; ") +
		" (or kubectl cordon the node and delete those pods), run gpuctl again, then kubectl uncordon; or --force to go on and stop them"
	return fail(msg, hint)
}

// summary names what the run disturbs, for a passing check.
func (d disruptions) summary() string {
	var parts []string
	if d.every != "" {
		parts = append(parts, d.every)
	}
	for _, n := range slices.Sorted(maps.Keys(d.nodes)) {
		parts = append(parts, "node "+n+": "+strings.Join(d.nodes[n], "; "))
	}
	return strings.Join(parts, "; ")
}

// planDisruptions reads from the plan and the nodes as they are whose GPUs the run takes away.
func planDisruptions(env *Env, nodes []corev1.Node) disruptions {
	var d disruptions
	p, existing := env.Plan, env.Detection.Existing
	draPlanned := slices.ContainsFunc(p.Steps, func(s plan.Step) bool { return s.Kind == plan.KindWaitGPUCluster })
	switch {
	case draPlanned && len(existing.ClusterPolicies) > 0:
		d.every = "the DRA stack replaces the device plugin, whose GPUs go with it"
	case !draPlanned && len(existing.GPUClusters) > 0:
		d.every = "the device plugin replaces the DRA driver, whose claims' GPUs go with it"
	}
	byName := map[string]*corev1.Node{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	// The nodes the upgrade preview names as repartitioned: one rule for both (plan.MIGRepartition).
	if s := p.Step(plan.MIGStepID); s != nil && s.Skip == "" {
		for _, n := range plan.MIGRepartition(s.Labels, nodes) {
			why := fmt.Sprintf("MIG manager repartitions its GPUs (%s %s → %s)", plan.MIGLabel, cmp.Or(byName[n].Labels[plan.MIGLabel], "none"), s.Labels.Nodes[n])
			if distro.Get(p.Distribution).MIGReboot {
				why += " and reboots it (WITH_REBOOT on GKE)"
			}
			d.add(n, why)
		}
	}
	if s := p.Step("node-labels"); s != nil && s.Skip == "" && s.Labels != nil && !draPlanned {
		def := defaultSharingKey(p)
		for _, n := range nodes {
			have, known := gfdSharing(&n)
			if !known {
				continue // no device plugin of the operator's has advertised its GPUs yet
			}
			key, ok := s.Labels.Nodes[n.Name]
			if !ok {
				key = def
			}
			if want := sharingOfKey(key); want != have {
				d.add(n.Name, "the device plugin advertises its GPUs anew ("+have+" → "+want+")")
			}
		}
	}
	return d
}

// defaultSharingKey is the device-plugin config of the nodes without a label of their own:
// devicePlugin.config.default of the operator release ("" when unshared).
func defaultSharingKey(p *plan.Plan) string {
	s := p.Step("release-" + plan.OperatorRelease)
	if s == nil || s.Release == nil {
		return ""
	}
	dp, _ := s.Release.Values["devicePlugin"].(map[string]any)
	cfg, _ := dp["config"].(map[string]any)
	def, _ := cfg["default"].(string)
	return def
}

// unshared is how sharing reads where the GPUs are not shared.
const unshared = "unshared"

// sharingOfKey is how a --sharing config key (plan.SharingChoice.Key: "time-slicing-4", "mps-2") shares
// a GPU: "time-slicing×4", or unshared for "".
func sharingOfKey(key string) string {
	i := strings.LastIndex(key, "-")
	if key == "" || i < 0 {
		return unshared
	}
	return key[:i] + "×" + key[i+1:]
}

// gfdSharing is how GPU feature discovery says the device plugin shares node's GPUs now
// (nvidia.com/gpu.sharing-strategy and nvidia.com/gpu.replicas, NVIDIA/k8s-device-plugin
// internal/lm/resource.go@v0.20.0); known is false where it has not labelled the node.
func gfdSharing(n *corev1.Node) (sharing string, known bool) {
	strategy, ok := n.Labels["nvidia.com/gpu.sharing-strategy"]
	if !ok {
		return "", false
	}
	if strategy == "none" || strategy == "" {
		return unshared, true
	}
	replicas, err := strconv.Atoi(n.Labels["nvidia.com/gpu.replicas"])
	if err != nil || replicas < 1 {
		replicas = 1
	}
	return strategy + "×" + strconv.Itoa(replicas), true
}

// gpuHolder is a pod that holds GPUs of a node the run disturbs.
type gpuHolder struct {
	Namespace, Name, Node string
	// What it holds: its nvidia.com/ resources, or its ResourceClaims on gpu.nvidia.com.
	What string
}

// gpuHolders are the pods that hold GPUs on the nodes d disturbs: not Succeeded or Failed, bound to
// such a node, with a container (or init container) that requests or limits an nvidia.com/ extended
// resource (nvidia.com/gpu, nvidia.com/mig-1g.5gb, …) or a ResourceClaim allocated a device of NVIDIA's
// DRA driver without admin access (admin access reserves no device). gpuctl's verify pods and the
// operator's own pods in its namespace (the validators and the CUDA and plugin validation pods they
// start, owned as the validator DaemonSet is: NVIDIA/gpu-operator cmd/nvidia-validator/main.go at
// v26.7.0) do not count: both come back by themselves.
func gpuHolders(d disruptions, pods []corev1.Pod, claims []resourcev1.ResourceClaim, operatorNS string) []gpuHolder {
	byName := map[string]*resourcev1.ResourceClaim{}
	for i := range claims {
		byName[claims[i].Namespace+"/"+claims[i].Name] = &claims[i]
	}
	var out []gpuHolder
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed ||
			d.on(p.Spec.NodeName) == "" || verifyPod(p) || operandPod(p, operatorNS) {
			continue
		}
		what := append(nvidiaResources(p), gpuClaims(p, byName)...)
		if len(what) > 0 {
			out = append(out, gpuHolder{Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName, What: strings.Join(what, ", ")})
		}
	}
	slices.SortFunc(out, func(a, b gpuHolder) int {
		return strings.Compare(a.Node+" "+a.Namespace+"/"+a.Name, b.Node+" "+b.Namespace+"/"+b.Name)
	})
	return out
}

// verifyPod: gpuctl verify's pods carry app.kubernetes.io/name=gpuctl-verify and
// app.kubernetes.io/managed-by=gpuctl (engine.VerifyNameLabel).
func verifyPod(p *corev1.Pod) bool {
	return p.Labels["app.kubernetes.io/name"] == plan.VerifyName && p.Labels["app.kubernetes.io/managed-by"] == "gpuctl"
}

// operandPod: a pod in the operator's namespace owned by a DaemonSet (the operands) or by one of the
// operator's custom resources (the validation pods the validator starts).
func operandPod(p *corev1.Pod, operatorNS string) bool {
	if p.Namespace != operatorNS {
		return false
	}
	return slices.ContainsFunc(p.OwnerReferences, func(r metav1.OwnerReference) bool {
		return r.Kind == "DaemonSet" || strings.HasPrefix(r.APIVersion, "nvidia.com/")
	})
}

// nvidiaResources are the nvidia.com/ extended resources p's containers request or limit, sorted.
func nvidiaResources(p *corev1.Pod) []string {
	seen := map[string]bool{}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, list := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
				for name, q := range list {
					if strings.HasPrefix(string(name), "nvidia.com/") && !q.IsZero() {
						seen[string(name)] = true
					}
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// gpuClaims names p's ResourceClaims that are allocated a device of NVIDIA's DRA driver.
func gpuClaims(p *corev1.Pod, claims map[string]*resourcev1.ResourceClaim) []string {
	var out []string
	for _, rc := range p.Spec.ResourceClaims {
		name := rc.ResourceClaimName
		if name == nil {
			// A claim from a template: Kubernetes names it in the pod's status.
			for _, st := range p.Status.ResourceClaimStatuses {
				if st.Name == rc.Name {
					name = st.ResourceClaimName
				}
			}
		}
		if name == nil {
			continue
		}
		c := claims[p.Namespace+"/"+*name]
		if c == nil || c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver == plan.DRADriverName && (r.AdminAccess == nil || !*r.AdminAccess) {
				out = append(out, "ResourceClaim "+*name+" on "+plan.DRADriverName)
				break
			}
		}
	}
	return out
}
