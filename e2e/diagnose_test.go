package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/support"
)

// untar reads a support bundle: its files by name (the bundle's top directory stripped) and its
// manifest.
func untar(t *testing.T, r io.Reader) (map[string][]byte, support.Manifest) {
	t.Helper()
	gz, err := gzip.NewReader(r)
	if err != nil {
		t.Fatalf("the bundle is not gzip: %v", err)
	}
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	top := ""
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		dir, name, ok := strings.Cut(hdr.Name, "/")
		if top == "" {
			top = dir
		}
		if !ok || dir != top {
			t.Errorf("entry %s is not under the bundle's directory %s", hdr.Name, top)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	var m support.Manifest
	if err := json.Unmarshal(files[support.ManifestName], &m); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manifest.json:\n%s", files[support.ManifestName])
		}
	})
	return files, m
}

// assertManifestComplete checks that the manifest lists exactly the files the archive holds.
func assertManifestComplete(t *testing.T, files map[string][]byte, m support.Manifest) {
	t.Helper()
	listed := map[string]bool{support.ManifestName: true}
	for _, f := range m.Files {
		listed[f.Name] = true
		if b, ok := files[f.Name]; !ok || len(b) != f.Size || f.What == "" {
			t.Errorf("manifest entry %+v: in the archive %v, %d bytes", f, ok, len(b))
		}
	}
	for name := range files {
		if !listed[name] {
			t.Errorf("%s is in the archive but not in the manifest", name)
		}
	}
}

// assertNoSecret scans every byte of every file for each secret, as is and base64-encoded.
func assertNoSecret(t *testing.T, files map[string][]byte, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		forms := []string{s, base64.StdEncoding.EncodeToString([]byte(s)), base64.RawStdEncoding.EncodeToString([]byte(s))}
		for name, b := range files {
			for _, f := range forms {
				if bytes.Contains(b, []byte(f)) {
					t.Errorf("%s holds a planted secret (%d bytes)", name, len(s))
				}
			}
		}
	}
}

// diagnose runs gpuctl diagnose -o - with a kubeconfig and returns the exit code and the bundle.
func diagnose(t *testing.T, kubeconfig string) (int, map[string][]byte, support.Manifest, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args := []string{"--kubeconfig", kubeconfig, "diagnose", "-o", "-"}
	code := cli.Run(context.Background(), cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut}, args, func(string) string { return "" })
	t.Logf("gpuctl diagnose -o - → exit %d\n%s", code, errOut.String())
	if code != 0 {
		return code, nil, support.Manifest{}, errOut.String()
	}
	files, m := untar(t, &out)
	return code, files, m, errOut.String()
}

// One TKGS sandbox with NVIDIA AI Enterprise: diagnose on the healthy stack, on a broken one, and as
// a user who may read little; the licence material, the NGC key (also given as a --set value) and a
// Secret's value appear in no file.
func TestDiagnose(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "tkgs", GPUNodes: 1, CPUNodes: 1}})
	ctx := t.Context()
	const plantedValue = "planted-diagnose-secret-7f3a91"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Kube.CoreV1().Secrets("gpu-operator").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "team-registry-password"},
		StringData: map[string]string{"password": plantedValue},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := nvaieInputs(t)
	// An NGC key handed to the driver container as an environment variable, as a user might to pull
	// from NGC inside it: it lands in the Helm values, the ClusterPolicy, the driver DaemonSet and pods.
	set := []string{"--set", "driver.env[0].name=NGC_API_KEY", "--set", "driver.env[0].value=" + testNGCKey}
	if code, _, stderr := gpuctlEnv(t, c, env, append([]string{"install"}, set...)...); code != 0 {
		t.Fatalf("install exited %d:\n%s", code, stderr)
	}
	secrets := []string{testNGCKey, "nls-token-e2e", plantedValue}

	t.Run("a healthy stack gives a complete bundle with no secret in it", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "bundle.tar.gz")
		code, stdout, _ := gpuctl(t, c, "diagnose", "-o", out)
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		if !strings.Contains(stdout, "Wrote "+out) {
			t.Errorf("stdout does not name the bundle: %s", stdout)
		}
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files, m := untar(t, f)
		assertManifestComplete(t, files, m)
		for _, want := range []string{"versions.json", "install-record.json", "helm/gpu-operator/history.yaml", "helm/gpu-operator/values-1.yaml",
			"helm/node-feature-discovery/history.yaml", "cluster/clusterpolicies.yaml", "cluster/nvidiadrivers.yaml", "nodes.yaml",
			"namespaces/gpu-operator/pods.yaml", "namespaces/gpu-operator/daemonsets.yaml", "namespaces/gpu-operator/deployments.yaml",
			"namespaces/gpu-operator/events.yaml", "namespaces/gpu-operator/secrets.yaml", "status.json", "status.txt", "check-pre.json", "check-pre.txt"} {
			if _, ok := files[want]; !ok {
				t.Errorf("the bundle lacks %s", want)
			}
		}
		if len(m.Forbidden) != 0 {
			t.Errorf("forbidden reads as the cluster admin: %+v", m.Forbidden)
		}
		assertNoSecret(t, files, secrets...)
		// The Secrets are listed by name, never with data.
		for _, name := range []string{"team-registry-password", "licensing-config", "ngc-secret"} {
			if !bytes.Contains(files["namespaces/gpu-operator/secrets.yaml"], []byte("name: "+name)) {
				t.Errorf("secrets.yaml does not name %s", name)
			}
		}
		// The NGC key was found and redacted in the Helm values, the ClusterPolicy and the record.
		for _, file := range []string{"helm/gpu-operator/values-1.yaml", "cluster/clusterpolicies.yaml", "install-record.json", "namespaces/gpu-operator/daemonsets.yaml"} {
			if !slices.ContainsFunc(m.Redactions, func(r support.Redaction) bool { return r.File == file && r.Count > 0 }) {
				t.Errorf("no redaction noted in %s: %+v", file, m.Redactions)
			}
		}
		// Every container's log is read, the validator's init containers included. kwok serves no
		// logs, so here each read ends as an entry under errors that names the file.
		for _, ctr := range []string{"driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation", "nvidia-driver-ctr", "nvidia-device-plugin"} {
			seen := false
			for name := range files {
				seen = seen || strings.HasSuffix(name, "/"+ctr+".log")
			}
			for _, e := range m.Errors {
				seen = seen || strings.HasSuffix(e.What, "/"+ctr+".log")
			}
			if !seen {
				t.Errorf("no log of container %s was read", ctr)
			}
		}
		var st engine.StatusResult
		if err := json.Unmarshal(files["status.json"], &st); err != nil || !st.Healthy {
			t.Errorf("status.json: %v, healthy %v", err, st.Healthy)
		}
		var v engine.Versions
		if err := json.Unmarshal(files["versions.json"], &v); err != nil || v.Kubernetes == "" || v.Operator == "" || len(v.Drivers) != len(simulatedGPUNodes(c)) {
			t.Errorf("versions.json: %v, %+v", err, v)
		}
	})

	t.Run("a read-only user gets a bundle that says what was forbidden", func(t *testing.T) {
		path, _, err := c.NewUser("viewer", "viewers")
		if err != nil {
			t.Fatal(err)
		}
		// view reads pods, logs and events but not nodes, Secrets (so not Helm's releases) or the
		// operator's custom resources.
		_, err = c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "viewers-view"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
			Subjects:   []rbacv1.Subject{{Kind: "Group", Name: "viewers", APIGroup: "rbac.authorization.k8s.io"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		code, files, m, stderr := diagnose(t, path)
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		assertManifestComplete(t, files, m)
		var forbidden []string
		for _, p := range m.Forbidden {
			forbidden = append(forbidden, p.What)
		}
		for _, want := range []string{"nodes", "helm history of gpu-operator", "namespaces/gpu-operator/secrets"} {
			if !slices.Contains(forbidden, want) {
				t.Errorf("forbidden %v lacks %s", forbidden, want)
			}
		}
		if !strings.Contains(stderr, "Not allowed to read") {
			t.Errorf("the summary does not say what was forbidden")
		}
		for _, want := range []string{"namespaces/gpu-operator/pods.yaml", "install-record.json"} {
			if _, ok := files[want]; !ok {
				t.Errorf("the read-only bundle lacks %s", want)
			}
		}
		assertNoSecret(t, files, secrets...)
	})

	t.Run("a broken stack still gives a bundle, and its status says not ready", func(t *testing.T) {
		breakValidators(t, c)
		code, files, m, _ := diagnose(t, c.Kubeconfig)
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		assertManifestComplete(t, files, m)
		var st engine.StatusResult
		if err := json.Unmarshal(files["status.json"], &st); err != nil || st.Healthy {
			t.Errorf("status.json: %v, healthy %v on a broken stack", err, st.Healthy)
		}
		if !bytes.Contains(files["status.txt"], []byte("validator")) {
			t.Errorf("status.txt does not mention the validators:\n%s", files["status.txt"])
		}
		assertNoSecret(t, files, secrets...)
	})
}
