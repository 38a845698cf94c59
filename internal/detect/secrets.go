package detect

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The Secrets NVIDIA AI Enterprise's vGPU guest driver reads (TKGS/VKS), by the names the GPU
// Operator's values refer to them; package plan creates them under the same names. See NVIDIA's "GPU
// Operator with NVIDIA AI Enterprise" guide:
// https://docs.nvidia.com/ai-enterprise/deployment/vmware/latest/gpu-operator.html
const (
	LicensingSecret = "licensing-config"
	NGCPullSecret   = "ngc-secret"
)

// SecretRef names an existing Secret. Detection knows only that it exists: its data is never read.
type SecretRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ManagedBy is its app.kubernetes.io/managed-by label ("gpuctl" when gpuctl created it).
	ManagedBy string `json:"managedBy,omitempty"`
}

// partialMetadataList asks the API server for a list's metadata only
// (k8s.io/apimachinery/pkg/apis/meta/v1 PartialObjectMetadataList), so a Secret's data never
// reaches gpuctl.
const partialMetadataList = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"

// nvaieSecrets lists, cluster-wide and by name, the Secrets NVIDIA AI Enterprise uses: their metadata
// only. A refused list is a warning (the plan then cannot reuse them).
func (g *gatherer) nvaieSecrets(ctx context.Context) error {
	rc := g.c.Kube.CoreV1().RESTClient()
	if rc == nil || reflect.ValueOf(rc).IsNil() {
		// Fake clientsets have no REST client; there is nothing to read.
		return nil
	}
	for _, name := range []string{LicensingSecret, NGCPullSecret} {
		refs, err := listSecretMetadata(ctx, rc, name)
		if err := g.optional("list Secrets named "+name, err); err != nil {
			return err
		}
		g.s.Secrets = append(g.s.Secrets, refs...)
	}
	sort.Slice(g.s.Secrets, func(i, j int) bool {
		a, b := g.s.Secrets[i], g.s.Secrets[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	return nil
}

func listSecretMetadata(ctx context.Context, rc rest.Interface, name string) ([]SecretRef, error) {
	raw, err := rc.Get().Resource("secrets").Param("fieldSelector", "metadata.name="+name).
		SetHeader("Accept", partialMetadataList).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var list metav1.PartialObjectMetadataList
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	var out []SecretRef
	for _, m := range list.Items {
		out = append(out, SecretRef{Namespace: m.Namespace, Name: m.Name, ManagedBy: m.Labels["app.kubernetes.io/managed-by"]})
	}
	return out, nil
}

// HasSecret reports whether a Secret of that name exists in the namespace.
func (e Existing) HasSecret(namespace, name string) bool {
	for _, s := range e.Secrets {
		if s.Namespace == namespace && s.Name == name {
			return true
		}
	}
	return false
}
