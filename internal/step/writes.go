package step

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/lock"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/release"
)

// lister lists the writes of a Plan's run by reading the cluster and asking it for server-side dry
// runs; it writes nothing. Each step kind adds its own (Kind.Writes).
type lister struct {
	clients  *kube.Clients
	plan     *plan.Plan
	w        *plan.Writes
	releases *release.Clients
	// nodes and before are read once, by the first kind that needs them.
	nodes  []corev1.Node
	before map[string]record.NodeMetadata
}

// Writes lists every write of p's run (plan.Writes), each decided by its step's kind as the run
// decides it; what only the run can know, each kind states as a rule (Writes.Rules, NodeRule). Then
// gpuctl's Lease and record.
func Writes(ctx context.Context, clients *kube.Clients, p *plan.Plan) (*plan.Writes, error) {
	l := &lister{clients: clients, plan: p, releases: release.NewClients(clients.Getter), w: &plan.Writes{
		Objects: []plan.ObjectWrite{}, CRDs: []plan.CRDWrite{}, Releases: []plan.ReleaseWrite{}, Nodes: []plan.NodeChange{}}}
	steps, err := running(p)
	if err != nil {
		return nil, err
	}
	for _, sk := range steps {
		if err := sk.k.Writes(ctx, l, sk.s); err != nil {
			return nil, fmt.Errorf("list the writes of step %s: %w", sk.s.ID, err)
		}
	}
	if l.w.Bookkeeping, err = bookkeepingWrites(ctx, clients.Kube); err != nil {
		return nil, err
	}
	l.w.Sort()
	return l.w, nil
}

// nodeList is the cluster's nodes, read once.
func (l *lister) nodeList(ctx context.Context) ([]corev1.Node, error) {
	if l.nodes == nil {
		nodes, err := l.clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		l.nodes = nodes.Items
	}
	return l.nodes, nil
}

// labelsBefore are the nodes' stack labels before gpuctl's first install (StackMetadataBefore), which
// a label gpuctl no longer wants goes back to.
func (l *lister) labelsBefore(ctx context.Context) (map[string]record.NodeMetadata, error) {
	if l.before == nil {
		nodes, err := l.nodeList(ctx)
		if err != nil {
			return nil, err
		}
		prev, err := record.Read(ctx, l.clients.Kube)
		if err != nil {
			return nil, err
		}
		l.before = StackMetadataBefore(prev, nodes)
	}
	return l.before, nil
}

// bookkeepingWrites are gpuctl's own writes: the install Lease (internal/lock) and the install record
// (internal/record), each created or updated.
func bookkeepingWrites(ctx context.Context, kc kubernetes.Interface) ([]plan.ObjectWrite, error) {
	lease := plan.ObjectWrite{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: lock.DefaultNamespace, Name: lock.DefaultName, Action: plan.WriteCreate}
	if _, err := kc.CoordinationV1().Leases(lock.DefaultNamespace).Get(ctx, lock.DefaultName, metav1.GetOptions{}); err == nil {
		lease.Action = plan.WriteUpdate
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read Lease %s/%s: %w", lock.DefaultNamespace, lock.DefaultName, err)
	}
	rec := plan.ObjectWrite{APIVersion: "v1", Kind: "ConfigMap", Namespace: record.Namespace, Name: record.Name, Action: plan.WriteCreate}
	if _, err := kc.CoreV1().ConfigMaps(record.Namespace).Get(ctx, record.Name, metav1.GetOptions{}); err == nil {
		rec.Action = plan.WriteUpdate
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read the install record: %w", err)
	}
	return []plan.ObjectWrite{lease, rec}, nil
}
