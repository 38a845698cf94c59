package podrun

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Env is a process's environment as a kubelet would give p's container c: the sandbox's own (PATH,
// …, without KUBECONFIG) and the container's variables, with the downward-API fields resolved from
// the pod. Variables from ConfigMaps and Secrets (envFrom, valueFrom other than fieldRef) are left
// out: the programs the sandbox runs take none.
func Env(p *corev1.Pod, c *corev1.Container) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	fields := map[string]string{
		"metadata.name": p.Name, "metadata.namespace": p.Namespace, "metadata.uid": string(p.UID),
		"spec.nodeName": p.Spec.NodeName, "spec.serviceAccountName": p.Spec.ServiceAccountName,
		"status.podIP": p.Status.PodIP, "status.hostIP": p.Status.HostIP,
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil:
			env = append(env, e.Name+"="+fields[e.ValueFrom.FieldRef.FieldPath])
		}
	}
	return env
}

// Kubeconfig writes (with write, the control plane's KubeconfigWithToken) a kubeconfig that
// authenticates as p's service account, with a token the API server minted for it, so that the
// program has exactly the RBAC its chart gave the pod. A pod finds the API server in-cluster; a
// local process needs the file.
func Kubeconfig(ctx context.Context, kube kubernetes.Interface, p *corev1.Pod, write func(name, token string) (string, error)) (string, error) {
	sa := p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	expiry := int64((24 * time.Hour).Seconds())
	tok, err := kube.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for service account %s/%s: %w", p.Namespace, sa, err)
	}
	return write(p.Namespace+"-"+p.Name, tok.Status.Token)
}

// ConfigMapFile copies the file c would see at want from the ConfigMap volume mounted over it into
// dir, and returns the copy's path ("" when no ConfigMap provides it).
func ConfigMapFile(ctx context.Context, kube kubernetes.Interface, p *corev1.Pod, c *corev1.Container, want, dir string) (string, error) {
	for _, vm := range c.VolumeMounts {
		rel, err := filepath.Rel(vm.MountPath, want)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		data, ok, err := configMapKey(ctx, kube, p, vm.Name, rel)
		if err != nil || !ok {
			return "", err
		}
		out := filepath.Join(dir, filepath.Base(want))
		return out, os.WriteFile(out, []byte(data), 0o644)
	}
	return "", nil
}

// ProjectConfigMap writes every file of p's ConfigMap volume into dir, as a kubelet projects it,
// and reports whether the volume is a ConfigMap.
func ProjectConfigMap(ctx context.Context, kube kubernetes.Interface, p *corev1.Pod, volume, dir string) (bool, error) {
	cm, v, err := configMapOf(ctx, kube, p, volume)
	if err != nil || cm == nil {
		return false, err
	}
	files := map[string]string{}
	for k, d := range cm.Data {
		files[k] = d
	}
	if len(v.Items) > 0 {
		files = map[string]string{}
		for _, it := range v.Items {
			files[it.Path] = cm.Data[it.Key]
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	for name, d := range files {
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(name)), []byte(d), 0o644); err != nil {
			return false, err
		}
	}
	return true, nil
}

// configMapKey is the content of the file at rel in p's ConfigMap volume.
func configMapKey(ctx context.Context, kube kubernetes.Interface, p *corev1.Pod, volume, rel string) (string, bool, error) {
	cm, v, err := configMapOf(ctx, kube, p, volume)
	if err != nil || cm == nil {
		return "", false, err
	}
	key := rel
	for _, item := range v.Items {
		if item.Path == rel {
			key = item.Key
		}
	}
	data, ok := cm.Data[key]
	return data, ok, nil
}

// configMapOf is the ConfigMap behind p's volume (nil when the volume is no ConfigMap).
func configMapOf(ctx context.Context, kube kubernetes.Interface, p *corev1.Pod, volume string) (*corev1.ConfigMap, *corev1.ConfigMapVolumeSource, error) {
	for _, v := range p.Spec.Volumes {
		if v.Name != volume || v.ConfigMap == nil {
			continue
		}
		cm, err := kube.CoreV1().ConfigMaps(p.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("configmap %s/%s: %w", p.Namespace, v.ConfigMap.Name, err)
		}
		return cm, v.ConfigMap, nil
	}
	return nil, nil, nil
}

// FreePort is a TCP port free on this machine now: every pod has its own network namespace, the
// processes share the machine's.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ShellQuote quotes s for /bin/sh.
func ShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Note appends a line to a program's log (the header a run starts with, say).
func Note(logPath, format string, args ...any) {
	if lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		fmt.Fprintf(lf, format+"\n", args...)
		lf.Close()
	}
}
