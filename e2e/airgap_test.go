package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	"github.com/gpuctl/gpuctl/internal/render"
)

// TestInstallFromAMirror installs with --registry and --image-pull-secret and checks that every
// workload in the install namespace (the charts' and the operands the real operator created) pulls
// from the mirror with the secret, and that gpuctl images listed each image. The sandbox's pods do not
// pull images, so the mirror need not exist.
func TestInstallFromAMirror(t *testing.T) {
	t.Parallel()
	const mirror = "mirror.example:5000"
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1}})
	ctx := t.Context()

	code, stdout, stderr := gpuctl(t, c, "images", "--registry", mirror, "--image-pull-secret", "mirror-pull", "-o", "json")
	if code != 0 {
		t.Fatalf("gpuctl images exited %d:\n%s", code, stderr)
	}
	var list render.ImageList
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, i := range list.Images {
		listed = append(listed, i.Image)
	}

	if code, _, stderr := gpuctl(t, c, "install", "--registry", mirror, "--image-pull-secret", "mirror-pull"); code != 0 {
		t.Fatalf("gpuctl install exited %d:\n%s", code, stderr)
	}

	type workload struct {
		name    string
		images  []string
		secrets []string
	}
	var all []workload
	ns := "gpu-operator"
	dss, err := c.Kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dss.Items {
		w := workload{name: "DaemonSet " + d.Name}
		for _, ct := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
			w.images = append(w.images, ct.Image)
		}
		for _, s := range d.Spec.Template.Spec.ImagePullSecrets {
			w.secrets = append(w.secrets, s.Name)
		}
		all = append(all, w)
	}
	deps, err := c.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps.Items {
		w := workload{name: "Deployment " + d.Name}
		for _, ct := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
			w.images = append(w.images, ct.Image)
		}
		for _, s := range d.Spec.Template.Spec.ImagePullSecrets {
			w.secrets = append(w.secrets, s.Name)
		}
		all = append(all, w)
	}
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		w := workload{name: "Pod " + p.Name}
		for _, ct := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			w.images = append(w.images, ct.Image)
		}
		for _, s := range p.Spec.ImagePullSecrets {
			w.secrets = append(w.secrets, s.Name)
		}
		all = append(all, w)
	}
	if len(dss.Items) < 4 || len(deps.Items) < 3 {
		t.Fatalf("only %d DaemonSets and %d Deployments in %s", len(dss.Items), len(deps.Items), ns)
	}
	for _, w := range all {
		for _, img := range w.images {
			if !strings.HasPrefix(img, mirror+"/") {
				t.Errorf("%s: image %s is not under the mirror", w.name, img)
			}
			if !slices.Contains(listed, img) {
				t.Errorf("%s: image %s is not in gpuctl images' list %q", w.name, img, listed)
			}
		}
		if !slices.Contains(w.secrets, "mirror-pull") {
			t.Errorf("%s: imagePullSecrets %q lack mirror-pull", w.name, w.secrets)
		}
	}
}
