package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
)

// TestInstallWithTheDocumentedLeastPrivilege installs as a user bound only to docs/rbac.yaml's
// ClusterRole, not cluster-admin: the role the documentation gives is enough for preflight (which
// checks every permission, RBAC escalation included), the install, verify and uninstall, and the user
// can do nothing the role does not allow. Users with less (no delete on pods, on DaemonSets) are
// refused by verify and uninstall before their first write.
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
	kubeconfig := bindUser(t, c, "alice", role)

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
	t.Run("verify as a role that may create pods but not delete them is refused before it creates one", func(t *testing.T) {
		// The role without delete on pods: verify would make pods that hold a GPU and could not
		// remove them.
		partial := role.DeepCopy()
		partial.Name = "gpuctl-installer-without-pod-delete"
		for i, r := range partial.Rules {
			if slices.Equal(r.APIGroups, []string{""}) && slices.Equal(r.Resources, []string{"pods"}) {
				partial.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "delete" || v == "deletecollection" })
			}
		}
		bob := bindUser(t, c, "bob", partial)
		code, stdout, stderr := gpuctl(t, c, "--kubeconfig", bob, "verify", "--timeout", "2m")
		if code != cli.ExitPreflight || !strings.Contains(stderr, "delete pods") || strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
			t.Errorf("verify as bob exited %d, want %d naming the missing delete on pods in a line:\n%s%s", code, cli.ExitPreflight, stdout, stderr)
		}
		if pods := verifyPodNames(t, c); len(pods) != 0 {
			t.Errorf("verify as bob left pods %v", pods)
		}
	})
	t.Run("verify as the documented role runs and removes its pods", func(t *testing.T) {
		code, stdout, stderr := gpuctl(t, c, "--kubeconfig", kubeconfig, "verify", "--timeout", "2m")
		if code != 0 {
			t.Errorf("verify as alice exited %d:\n%s%s", code, stdout, stderr)
		}
		assertNoVerifyPods(t, c)
	})
	t.Run("uninstall as a role that may not delete DaemonSets is refused before its first write", func(t *testing.T) {
		partial := role.DeepCopy()
		partial.Name = "gpuctl-installer-without-workload-delete"
		for i, r := range partial.Rules {
			if slices.Equal(r.APIGroups, []string{"apps"}) && slices.Contains(r.Resources, "daemonsets") {
				partial.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "delete" })
			}
		}
		carol := bindUser(t, c, "carol", partial)
		// The stack's controllers keep writing its objects' status, so what must not move is named:
		// each release's revisions, the ClusterPolicy, the taints.
		stack := func() string {
			var s []string
			for _, name := range []string{"gpu-operator", "node-feature-discovery"} {
				for _, r := range releaseHistory(t, c, name) {
					s = append(s, fmt.Sprintf("%s %d %s", r.Name, r.Revision, r.Status))
				}
			}
			return fmt.Sprint(s, clusterPolicyUID(t, c), taintsByNode(t, c))
		}
		before := stack()
		for _, args := range [][]string{{"uninstall", "--dry-run"}, {"uninstall", "--yes"}} {
			code, stdout, stderr := gpuctl(t, c, append([]string{"--kubeconfig", carol}, args...)...)
			if code != cli.ExitPreflight || !strings.Contains(stderr, "delete apps/daemonsets in gpu-operator") {
				t.Errorf("%v as carol exited %d, want %d naming the missing delete on DaemonSets:\n%s%s", args, code, cli.ExitPreflight, stdout, stderr)
			}
		}
		if after := stack(); after != before {
			t.Errorf("carol's uninstall changed the stack:\nbefore %s\nafter  %s", before, after)
		}
	})
	t.Run("uninstall as the documented role removes the stack", func(t *testing.T) {
		code, res, stderr := uninstallJSON(t, c, "--kubeconfig", kubeconfig, "--yes")
		if code != 0 {
			t.Fatalf("uninstall as alice exited %d: %+v\n%s", code, res.Steps, stderr)
		}
		if rels := releaseHistory(t, c, "gpu-operator"); len(rels) != 0 {
			t.Errorf("release gpu-operator is still there: %d revisions", len(rels))
		}
	})
}

// bindUser makes a user of the sandbox bound to a copy of role and returns its kubeconfig.
func bindUser(t *testing.T, c *sandbox.Cluster, user string, role *rbacv1.ClusterRole) string {
	t.Helper()
	ctx := t.Context()
	if _, err := c.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, _, err := c.NewUser(user)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: user, APIGroup: "rbac.authorization.k8s.io"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}
