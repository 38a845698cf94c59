package driverimage

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
)

// Spec is one driver an install deploys, read from the rendered objects: the ClusterPolicy's, or an
// NVIDIADriver's (with its nodeSelector).
type Spec struct {
	// Owner names the object: "ClusterPolicy", "NVIDIADriver default".
	Owner                      string
	Precompiled                bool
	Repository, Image, Version string
	PullSecrets                []string
	NodeSelector               map[string]string
}

// Specs are the drivers among the objects the install writes: the ClusterPolicy's driver unless
// it is off or handed to NVIDIADrivers (useNvidiaDriverCRD), and every NVIDIADriver.
func Specs(objs []*unstructured.Unstructured) []Spec {
	var out []Spec
	for _, u := range objs {
		switch u.GetKind() {
		case "ClusterPolicy":
			d, _, _ := unstructured.NestedMap(u.Object, "spec", "driver")
			if d == nil || d["enabled"] == false || d["useNvidiaDriverCRD"] == true {
				continue
			}
			out = append(out, specOf("ClusterPolicy", d))
		case "NVIDIADriver":
			d, _, _ := unstructured.NestedMap(u.Object, "spec")
			s := specOf("NVIDIADriver "+u.GetName(), d)
			sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "nodeSelector")
			s.NodeSelector = sel
			out = append(out, s)
		}
	}
	return out
}

func specOf(owner string, d map[string]any) Spec {
	s := Spec{Owner: owner, Precompiled: d["usePrecompiled"] == true}
	s.Repository, _ = d["repository"].(string)
	s.Image, _ = d["image"].(string)
	s.Version = fmt.Sprint(d["version"])
	if d["version"] == nil {
		s.Version = ""
	}
	if ps, ok := d["imagePullSecrets"].([]any); ok {
		for _, p := range ps {
			if name, ok := p.(string); ok {
				s.PullSecrets = append(s.PullSecrets, name)
			}
		}
	}
	return s
}

// PullSecretConfigs are the .dockerconfigjson of the named pull secrets that exist in the install's
// namespace; one not there yet (gpuctl may be about to create it) or not readable is left out, and the
// registry is then asked without it.
func PullSecretConfigs(ctx context.Context, kube kubernetes.Interface, namespace string, names []string) [][]byte {
	if kube == nil {
		return nil
	}
	var out [][]byte
	for _, name := range names {
		s, err := kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		if b := s.Data[corev1.DockerConfigJsonKey]; len(b) > 0 {
			out = append(out, b)
		}
	}
	return out
}
