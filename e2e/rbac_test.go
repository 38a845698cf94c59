package e2e

import (
	"os"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
)

// TestInstallWithTheDocumentedLeastPrivilege installs as a user bound only to docs/rbac.yaml's
// ClusterRole, not cluster-admin: the role the documentation gives is enough for preflight (which
// checks every permission, RBAC escalation included) and for the install itself, and the user can
// do nothing the role does not allow.
func TestInstallWithTheDocumentedLeastPrivilege(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(b, role); err != nil {
		t.Fatalf("docs/rbac.yaml: %v", err)
	}
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1}})
	ctx := t.Context()
	if _, err := c.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, _, err := c.NewUser("alice", "gpu-platform")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "gpuctl-installer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "alice", APIGroup: "rbac.authorization.k8s.io"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("the role is less than cluster-admin", func(t *testing.T) {
		code, stdout, stderr := gpuctl(t, c, "--kubeconfig", kubeconfig, "check", "--pre")
		if code != 0 {
			t.Fatalf("check --pre as alice exited %d:\n%s%s", code, stdout, stderr)
		}
		// Preflight asked the API server about every permission the plan needs, one by one.
		if strings.Contains(stdout, "like cluster-admin") || !strings.Contains(stdout, "you may do everything the install does (all") {
			t.Errorf("the permissions check did not judge alice's role permission by permission:\n%s", stdout)
		}
	})
	t.Run("it does not let alice make herself cluster-admin or delete nodes", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		ki := kubernetes.NewForConfigOrDie(cfg)
		dry := []string{metav1.DryRunAll}
		if err := ki.CoreV1().Nodes().Delete(ctx, c.Nodes[0].Node.Name, metav1.DeleteOptions{DryRun: dry}); !apierrors.IsForbidden(err) {
			t.Errorf("alice deleting a node: %v, want forbidden", err)
		}
		_, err = ki.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "alice-admin"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: "alice", APIGroup: "rbac.authorization.k8s.io"}},
		}, metav1.CreateOptions{DryRun: dry})
		if !apierrors.IsForbidden(err) {
			t.Errorf("alice binding cluster-admin to herself: %v, want forbidden", err)
		}
	})
	t.Run("an install as the documented role reaches Reconciled", func(t *testing.T) {
		res, _ := installJSON(t, c, "--kubeconfig", kubeconfig)
		assertReconciled(t, c, res.Plan.Step("wait-clusterpolicy").Target)
	})
}
