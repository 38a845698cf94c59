package e2e

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
)

// Every failure case ends with a clear message, a non-zero exit and an unchanged cluster: preflight
// and planning run before the first write.
func TestInstallFailsBeforeTheFirstWrite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		scenario sandbox.Scenario
		prepare  func(t *testing.T, c *sandbox.Cluster) (kubeconfig string)
		code     int
		want     []string
	}{
		{
			name:     "GKE with its own device plugin running on the GPU nodes",
			scenario: sandbox.Scenario{Distro: "gke", GPUNodes: 2, CPUNodes: 1, GKEDevicePlugin: true},
			code:     cli.ExitPreflight,
			want:     []string{"gke-no-default-nvidia-gpu-device-plugin=true"},
		},
		{
			name:     "GKE Autopilot",
			scenario: sandbox.Scenario{Distro: "gke", GPUNodes: 1, CPUNodes: 1, GKEAutopilot: true},
			code:     cli.ExitUnsupported,
			want:     []string{"Autopilot"},
		},
		{
			name:     "nodes on a Kubernetes older than the operator bundle supports",
			scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 1, KubeletVersion: "v1.29.4"},
			code:     cli.ExitPreflight,
			want:     []string{"1.29"},
		},
		{
			name:     "a user whose RBAC lacks what the install needs",
			scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 1},
			prepare:  readOnlyUser,
			code:     cli.ExitPreflight,
			want:     []string{"permission"},
		},
		{
			name:     "a GPU operator another tool installed",
			scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 1, CPUNodes: 1},
			prepare:  helmInstallOperatorElsewhere,
			code:     cli.ExitPreflight,
			want:     []string{"nvidia/nvidia-gpu-operator"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sandbox.StartT(t, sandbox.Options{Scenario: tc.scenario, NoOperator: true})
			kubeconfig := c.Kubeconfig
			if tc.prepare != nil {
				kubeconfig = tc.prepare(t, c)
			}
			before := clusterState(t, c)
			var out, errOut strings.Builder
			code := cli.Run(context.Background(), cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut},
				[]string{"--kubeconfig", kubeconfig, "--progress", "plain", "install"}, func(string) string { return "" })
			t.Logf("exit %d\n%s%s", code, out.String(), errOut.String())
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String()+errOut.String(), w) {
					t.Errorf("output does not mention %q", w)
				}
			}
			assertUnchanged(t, before, clusterState(t, c))
		})
	}
}

// readOnlyUser mints a user who may read everything and write nothing.
func readOnlyUser(t *testing.T, c *sandbox.Cluster) string {
	t.Helper()
	path, _, err := c.NewUser("auditor", "auditors")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Kube.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "auditors-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", Name: "auditors", APIGroup: "rbac.authorization.k8s.io"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// view cannot list nodes or CRDs, which detection reads; grant those reads too, so what fails is
	// the permission check and not detection.
	_, err = c.Kube.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "auditors-cluster-read"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Kube.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "auditors-cluster-read"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "auditors-cluster-read"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", Name: "auditors", APIGroup: "rbac.authorization.k8s.io"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// helmInstallOperatorElsewhere installs the GPU operator chart with plain Helm under another name
// and namespace, as someone following NVIDIA's docs would have.
func helmInstallOperatorElsewhere(t *testing.T, c *sandbox.Cluster) string {
	t.Helper()
	helmInstall(t, c, "nvidia", "nvidia-gpu-operator", "gpu-operator")
	return c.Kubeconfig
}
