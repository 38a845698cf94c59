package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// VerifyName is the app.kubernetes.io/name of gpuctl verify's pods and the prefix of their names.
const VerifyName = "gpuctl-verify"

// VerifyInput is what a verify plan is made of: what the cluster holds now and the user's options.
type VerifyInput struct {
	// Namespace is the operator's, where the pods run.
	Namespace string
	// Image and ImagePullSecrets are the workload's (--image, --image-pull-secret).
	Image            string
	ImagePullSecrets []string
	// Nodes are the GPU nodes to verify (labelled a GPU node and selected by --nodes).
	Nodes []string
	// Requests say what each node's pod asks for (a node without one asks for one nvidia.com/gpu).
	Requests map[string]VerifyRequest
	// Earlier are the pods earlier verify runs left behind.
	Earlier []VerifyPodRef
	// EarlierClaimTemplates are the ResourceClaimTemplates earlier verify runs left behind.
	EarlierClaimTemplates []VerifyPodRef
	// RunID labels the run's pods and ends their names; VerifyRunID derives it from the rest.
	RunID string
}

// VerifyGPUResource is the extended resource NVIDIA's device plugin advertises for whole GPUs (and, under
// time-slicing or MPS with renameByDefault false, for their replicas).
const VerifyGPUResource = "nvidia.com/gpu"

// VerifyRequest is how one node's pod asks for a GPU: one unit of an extended resource the node
// advertises (nvidia.com/gpu, or nvidia.com/mig-<profile> under the mixed MIG strategy), or, with
// NVIDIA's DRA driver, a ResourceClaim from the run's ResourceClaimTemplate on DeviceClass.
type VerifyRequest struct {
	Resource    string `json:"resource,omitempty"`
	DeviceClass string `json:"deviceClass,omitempty"`
}

// String is the request as verify names it: the resource, or "a ResourceClaim on <class>".
func (r VerifyRequest) String() string {
	if r.DeviceClass != "" {
		return "a ResourceClaim on " + r.DeviceClass
	}
	return r.Resource
}

// VerifyPodRef is a verify pod (or ResourceClaimTemplate) found in the cluster.
type VerifyPodRef struct {
	Namespace string
	Name      string
	UID       types.UID
	// Run is its gpuctl.io/verify-run label ("" when it has none).
	Run string
}

// VerifyPlan is every write of a gpuctl verify run, decided before the first: the pods earlier runs
// left, deleted first (each only while it has the UID listed, so a pod made meanwhile under the same
// name stays); the pods it creates, one per GPU node; and that it deletes those at the end, however
// the run ends. The run's result reports what it did in this same shape.
type VerifyPlan struct {
	RunID            string   `json:"runID"`
	Namespace        string   `json:"namespace"`
	Image            string   `json:"image"`
	ImagePullSecrets []string `json:"imagePullSecrets,omitempty"`
	// Delete are the pods deleted before any is created.
	Delete []VerifyDeletion `json:"delete,omitempty"`
	// DeleteClaimTemplates are the ResourceClaimTemplates earlier runs left, deleted with Delete.
	DeleteClaimTemplates []VerifyDeletion `json:"deleteClaimTemplates,omitempty"`
	// ClaimTemplates are the ResourceClaimTemplates created before the pods, one per device class the
	// pods' claims come from.
	ClaimTemplates []VerifyClaimTemplate `json:"claimTemplates,omitempty"`
	// Create are the pods created, in node order.
	Create []VerifyPod `json:"create,omitempty"`
	// DeleteAtEnd names the pods of Create, deleted when the run ends.
	DeleteAtEnd []string `json:"deleteAtEnd,omitempty"`
	// DeleteClaimTemplatesAtEnd names the ClaimTemplates, deleted when the run ends, after its pods.
	DeleteClaimTemplatesAtEnd []string `json:"deleteClaimTemplatesAtEnd,omitempty"`
}

// VerifyClaimTemplate is a ResourceClaimTemplate verify creates: one request for one device of
// DeviceClass. The pods that name it get a ResourceClaim each, made and deleted with them by
// Kubernetes' resourceclaim controller.
type VerifyClaimTemplate struct {
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	DeviceClass string `json:"deviceClass"`
}

// VerifyDeletion is a pod verify deletes, and why it may.
type VerifyDeletion struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	Why       string    `json:"why"`
}

// VerifyPod is a pod verify creates: one CUDA workload pinned to one GPU node.
type VerifyPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Node      string `json:"node"`
	Image     string `json:"image"`
	// Resource is the extended resource the pod asks one of (nvidia.com/gpu, nvidia.com/mig-1g.5gb).
	Resource string `json:"resource,omitempty"`
	// ClaimTemplate names the ResourceClaimTemplate (of ClaimTemplates) the pod's GPU claim comes from,
	// instead of Resource.
	ClaimTemplate string `json:"claimTemplate,omitempty"`
}

// BuildVerify makes a verify run's plan. It is pure: the same input gives the same plan.
func BuildVerify(in VerifyInput) *VerifyPlan {
	p := &VerifyPlan{RunID: in.RunID, Namespace: in.Namespace, Image: in.Image, ImagePullSecrets: slices.Clone(in.ImagePullSecrets)}
	for _, e := range sortedRefs(in.Earlier) {
		why := "left by an earlier verify run"
		if e.Run != "" {
			why += " (" + e.Run + ")"
		}
		p.Delete = append(p.Delete, VerifyDeletion{Namespace: e.Namespace, Name: e.Name, UID: e.UID, Why: why})
	}
	for _, e := range sortedRefs(in.EarlierClaimTemplates) {
		why := "left by an earlier verify run"
		if e.Run != "" {
			why += " (" + e.Run + ")"
		}
		p.DeleteClaimTemplates = append(p.DeleteClaimTemplates, VerifyDeletion{Namespace: e.Namespace, Name: e.Name, UID: e.UID, Why: why})
	}
	taken := map[string]bool{}
	templates := map[string]string{}
	for _, n := range uniqueSorted(in.Nodes) {
		name := verifyPodName(n, in.RunID, taken)
		taken[name] = true
		pod := VerifyPod{Namespace: in.Namespace, Name: name, Node: n, Image: in.Image}
		switch r := in.Requests[n]; {
		case r.DeviceClass != "":
			if templates[r.DeviceClass] == "" {
				templates[r.DeviceClass] = verifyTemplateName(in.RunID, len(templates))
				p.ClaimTemplates = append(p.ClaimTemplates, VerifyClaimTemplate{Namespace: in.Namespace, Name: templates[r.DeviceClass], DeviceClass: r.DeviceClass})
				p.DeleteClaimTemplatesAtEnd = append(p.DeleteClaimTemplatesAtEnd, templates[r.DeviceClass])
			}
			pod.ClaimTemplate = templates[r.DeviceClass]
		case r.Resource != "":
			pod.Resource = r.Resource
		default:
			pod.Resource = VerifyGPUResource
		}
		p.Create = append(p.Create, pod)
		p.DeleteAtEnd = append(p.DeleteAtEnd, name)
	}
	return p
}

// verifyTemplateName is gpuctl-verify-<run> for the run's first device class, gpuctl-verify-<i>-<run>
// for further ones (NVIDIA's DRA driver has one, gpu.nvidia.com, for GPUs).
func verifyTemplateName(id string, i int) string {
	if i == 0 {
		return VerifyName + "-" + id
	}
	return fmt.Sprintf("%s-%d-%s", VerifyName, i+1, id)
}

// VerifyRunID is a run ID for in: a digest of everything the plan depends on but the ID itself, so a
// dry run names the very pods the run creates while the cluster stays as it was, and a run after one
// that left pods behind (their UIDs are part of it) never reuses their names.
func VerifyRunID(in VerifyInput) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q\n", in.Namespace, in.Image, in.ImagePullSecrets)
	for _, n := range uniqueSorted(in.Nodes) {
		fmt.Fprintf(h, "node %q\n", n)
		if r, ok := in.Requests[n]; ok && r != (VerifyRequest{Resource: VerifyGPUResource}) && r != (VerifyRequest{}) {
			fmt.Fprintf(h, "request %q %q\n", r.Resource, r.DeviceClass)
		}
	}
	for _, e := range sortedRefs(in.Earlier) {
		fmt.Fprintf(h, "earlier %q %q %q\n", e.Namespace, e.Name, e.UID)
	}
	for _, e := range sortedRefs(in.EarlierClaimTemplates) {
		fmt.Fprintf(h, "earlier template %q %q %q\n", e.Namespace, e.Name, e.UID)
	}
	return hex.EncodeToString(h.Sum(nil))[:6]
}

// verifyPodName is gpuctl-verify-<node>-<run>, the node's name cut so the whole stays a valid
// 63-character hostname; when two nodes' names cut to the same (a.b and a-b; long common prefixes),
// later ones end in a number as well.
func verifyPodName(node, id string, taken map[string]bool) string {
	n := strings.Trim(strings.ReplaceAll(strings.ToLower(node), ".", "-"), "-")
	for i := 1; ; i++ {
		suffix := "-" + id
		if i > 1 {
			suffix = fmt.Sprintf("-%d-%s", i, id)
		}
		cut := n
		if room := 63 - len(VerifyName) - 1 - len(suffix); len(cut) > room {
			cut = strings.TrimRight(cut[:room], "-")
		}
		if name := VerifyName + "-" + cut + suffix; !taken[name] {
			return name
		}
	}
}

func uniqueSorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

func sortedRefs(refs []VerifyPodRef) []VerifyPodRef {
	refs = slices.Clone(refs)
	slices.SortFunc(refs, func(a, b VerifyPodRef) int {
		return strings.Compare(a.Namespace+"/"+a.Name+"/"+string(a.UID), b.Namespace+"/"+b.Name+"/"+string(b.UID))
	})
	return refs
}
