package record

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuctl/gpuctl/internal/plan"
)

// The install record is a ConfigMap in kube-system, next to gpuctl's lock (internal/lock), rather
// than in the operator's namespace: it must outlive that namespace (uninstall without --purge keeps
// what --purge needs to know), it names cluster-scoped objects (CRDs, node labels), and kube-system
// exists before gpuctl creates anything.
const (
	Namespace = "kube-system"
	Name      = "gpuctl-install"
	// recordKey is the ConfigMap data key holding the JSON record.
	recordKey = "record.json"
)

// Record is what gpuctl resolved and changed when it last installed or upgraded: later commands
// (status, upgrade, uninstall) read it. It never holds licence material: the NVAIE inputs are read
// from files or the environment and only the Secrets' names appear in the values.
type Record struct {
	// GpuctlVersion is the version of the gpuctl that wrote the record.
	GpuctlVersion string `json:"gpuctlVersion"`
	// Command is the command that wrote it: install, upgrade or uninstall.
	Command string    `json:"command"`
	Updated time.Time `json:"updated"`
	// Result is how that command ended: succeeded, failed.
	Result string `json:"result"`
	// Uninstalled is set by uninstall without --purge: the stack is gone, and the record keeps what
	// gpuctl created for a later uninstall --purge.
	Uninstalled bool `json:"uninstalled,omitempty"`

	Distribution    string `json:"distribution"`
	Profile         string `json:"profile"`
	Namespace       string `json:"namespace"`
	OperatorVersion string `json:"operatorVersion"`
	// Inputs are the user's own choices, as given (-f files by content, so upgrade can reuse them when
	// the files are gone).
	Inputs Inputs `json:"inputs"`

	// Releases are the Helm releases gpuctl applied; Created says whether gpuctl installed them (as
	// opposed to finding them).
	Releases []Object `json:"releases,omitempty"`
	// CRDs and Namespaces gpuctl applied, by name, with whether it created them.
	CRDs       []Object `json:"crds,omitempty"`
	Namespaces []Object `json:"namespaces,omitempty"`
	// Objects are the other objects gpuctl applied outside its releases (profile prerequisites, the
	// NVIDIA AI Enterprise Secrets, the PodSecurityPolicy RoleBinding, OpenShift's NFD instance), with
	// their apiVersion and kind: uninstall --purge deletes the ones gpuctl created, also in a namespace
	// it found.
	Objects []Object `json:"objects,omitempty"`
	// CustomResources are the ClusterPolicy, NVIDIADriver and NodeFeatureDiscovery objects gpuctl's runs
	// created (through its Helm releases, its OLM path or its own applies), each with its UID:
	// uninstall deletes these and no others, with the UID as a precondition, so an object of the same
	// name that someone else made is never deleted.
	CustomResources []Object `json:"customResources,omitempty"`
	// TracksCustomResources says the record keeps CustomResources (a record of an older gpuctl does
	// not: uninstall then deletes only objects provably gpuctl's by other means).
	TracksCustomResources bool `json:"tracksCustomResources,omitempty"`
	// TaintedNodes are the nodes gpuctl tainted (the taints themselves are recorded on each node in
	// the gpuctl.io/added-taints annotation, which untaint and uninstall read).
	TaintedNodes []string `json:"taintedNodes,omitempty"`
	// NodeMetadataBefore holds, per node, the labels and annotations in the prefixes NFD and the
	// operator write (feature.node.kubernetes.io/, nvidia.com/, nfd.node.kubernetes.io/) as they were
	// before gpuctl first installed: uninstall removes every other label and annotation in those
	// prefixes and restores these.
	NodeMetadataBefore map[string]NodeMetadata `json:"nodeMetadataBefore,omitempty"`
}

// Inputs are the inputs a user gave install or upgrade.
type Inputs struct {
	// Profile is --profile ("" = chosen from the distribution).
	Profile string `json:"profile,omitempty"`
	// Files are the -f values files: their name and parsed content, in order.
	Files   []plan.Layer `json:"files,omitempty"`
	Set     []string     `json:"set,omitempty"`
	NoTaint bool         `json:"noTaint,omitempty"`
	// Taint is --taint: upgrade keeps the GPU nodes tainted where gpuctl would not taint by default.
	Taint                  bool `json:"taint,omitempty"`
	TolerateExistingTaints bool `json:"tolerateExistingTaints,omitempty"`
	// Monitoring is --monitoring (or the config file's monitoring key): upgrade keeps it.
	Monitoring bool `json:"monitoring,omitempty"`
	// DRA is --dra (or the config file's dra key): the GPUCluster instead of the ClusterPolicy; upgrade keeps it.
	DRA     bool   `json:"dra,omitempty"`
	Channel string `json:"channel,omitempty"`
	// Sharing is --sharing (or the config file's sharing key), as given: upgrade keeps it unless given
	// anew; "none" is recorded as nothing.
	Sharing []string `json:"sharing,omitempty"`
	// MIG is --mig (or the config file's mig key), as given: upgrade keeps it unless given anew;
	// "none" is recorded as nothing.
	MIG []string `json:"mig,omitempty"`
	// Precompiled is --precompiled ("auto"): upgrade keeps it, and asks the registry again for the
	// GPU nodes' kernels then.
	Precompiled string `json:"precompiled,omitempty"`
	// Registry and ImagePullSecrets are --registry and --image-pull-secret: an air-gapped cluster's
	// upgrade must pull from the same mirror.
	Registry         string   `json:"registry,omitempty"`
	ImagePullSecrets []string `json:"imagePullSecrets,omitempty"`
	// Adopted are the values of the GPU operator release gpuctl took over (--adopt), as that release
	// had them: upgrade layers them where the adopting install did.
	Adopted *plan.Layer `json:"adopted,omitempty"`
}

// Object names something gpuctl applied.
type Object struct {
	// APIVersion and Kind are set for Objects (releases, CRDs and namespaces have their own lists).
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace,omitempty"`
	// UID is the object's UID when gpuctl recorded it (for CustomResources, CRDs, Namespaces and
	// Objects; releases have none): for one gpuctl created, that object, not merely one of that name,
	// so uninstall deletes it with the UID as a precondition. Empty in a record of an older gpuctl.
	UID types.UID `json:"uid,omitempty"`
	// Created is true when gpuctl created it; false when it was there before (found).
	Created bool `json:"created"`
	// Adopted is set on a release gpuctl took over with --adopt: found, not created, and gpuctl's since.
	Adopted bool `json:"adopted,omitempty"`
}

// NodeMetadata is a node's labels and annotations in the prefixes NFD and the operator write.
type NodeMetadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// stackPrefixes are the label and annotation prefixes NFD and the GPU operator write on nodes:
// feature.node.kubernetes.io/ (NFD's feature labels), nfd.node.kubernetes.io/ (NFD's bookkeeping
// annotations), nvidia.com/ (the operator's and GPU feature discovery's labels, e.g. nvidia.com/gpu.present,
// nvidia.com/gpu.product, nvidia.com/gpu-driver-upgrade-state). NFD's own chart prunes its labels the
// same way on uninstall (kubernetes-sigs/node-feature-discovery
// deployment/helm/node-feature-discovery/templates/post-delete-job.yaml: nfd-master -prune); our NFD
// chart has no hooks (docs/nfd-chart-deviations.md), so uninstall does it.
var stackPrefixes = []string{"feature.node.kubernetes.io/", "nfd.node.kubernetes.io/", "nvidia.com/"}

// IsNFDKey: a key in the prefixes NFD alone writes (left alone when NFD was not gpuctl's).
func IsNFDKey(k string) bool {
	return strings.HasPrefix(k, "feature.node.kubernetes.io/") || strings.HasPrefix(k, "nfd.node.kubernetes.io/")
}

func InStackPrefix(k string) bool {
	for _, p := range stackPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// StackMetadata returns the node's labels and annotations in stackPrefixes (nil when it has none).
func StackMetadata(n *corev1.Node) *NodeMetadata {
	pick := func(m map[string]string) map[string]string {
		var out map[string]string
		for k, v := range m {
			if InStackPrefix(k) {
				if out == nil {
					out = map[string]string{}
				}
				out[k] = v
			}
		}
		return out
	}
	md := &NodeMetadata{Labels: pick(n.Labels), Annotations: pick(n.Annotations)}
	if md.Labels == nil && md.Annotations == nil {
		return nil
	}
	return md
}

// Encode returns the record as the ConfigMap's JSON.
func (r *Record) Encode() (string, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode install record: %w", err)
	}
	return string(b), nil
}

// Decode parses a record written by Encode.
func Decode(s string) (*Record, error) {
	r := &Record{}
	if err := json.Unmarshal([]byte(s), r); err != nil {
		return nil, fmt.Errorf("install record %s/%s: %w", Namespace, Name, err)
	}
	return r, nil
}

// Read reads the install record, or returns nil when there is none.
func Read(ctx context.Context, kc kubernetes.Interface) (*Record, error) {
	cm, err := kc.CoreV1().ConfigMaps(Namespace).Get(ctx, Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read install record %s/%s: %w", Namespace, Name, err)
	}
	return Decode(cm.Data[recordKey])
}

// Write creates or replaces the install record.
func Write(ctx context.Context, kc kubernetes.Interface, r *Record) error {
	data, err := r.Encode()
	if err != nil {
		return err
	}
	cms := kc.CoreV1().ConfigMaps(Namespace)
	cm, err := cms.Get(ctx, Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "gpuctl"}}, Data: map[string]string{recordKey: data}}
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: "gpuctl"})
	} else if err == nil {
		cm.Data = map[string]string{recordKey: data}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "gpuctl"})
	}
	if err != nil {
		return fmt.Errorf("write install record %s/%s: %w", Namespace, Name, err)
	}
	return nil
}

// Delete removes the install record (uninstall --purge).
func Delete(ctx context.Context, kc kubernetes.Interface) error {
	err := kc.CoreV1().ConfigMaps(Namespace).Delete(ctx, Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete install record %s/%s: %w", Namespace, Name, err)
	}
	return nil
}

// MergeObjects adds now's objects to before's; an object created by either run stays created. An
// object an earlier run created and this one found keeps the earlier run's UID: if someone re-created
// it meanwhile (another UID), the one there now is not gpuctl's.
func MergeObjects(before, now []Object) []Object {
	key := func(o Object) string { return o.APIVersion + "/" + o.Kind + "/" + o.Namespace + "/" + o.Name }
	byKey := map[string]Object{}
	for _, o := range before {
		byKey[key(o)] = o
	}
	for _, o := range now {
		if prev, ok := byKey[key(o)]; ok {
			if prev.Created && !o.Created && prev.UID != "" {
				o.UID = prev.UID
			}
			o.Created = o.Created || prev.Created
			o.Adopted = o.Adopted || prev.Adopted
		}
		byKey[key(o)] = o
	}
	out := make([]Object, 0, len(byKey))
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		out = append(out, byKey[k])
	}
	return out
}

// CreatedNames returns the names of the objects gpuctl created.
func CreatedNames(objs []Object) []string {
	var out []string
	for _, o := range objs {
		if o.Created {
			out = append(out, o.Name)
		}
	}
	return out
}

// Release returns the recorded release of that name, or nil.
func (r *Record) Release(name string) *Object {
	for i := range r.Releases {
		if r.Releases[i].Name == name {
			return &r.Releases[i]
		}
	}
	return nil
}
