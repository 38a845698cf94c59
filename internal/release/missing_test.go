package release

import (
	"errors"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"

	"helm.sh/helm/v4/pkg/kube"
)

func TestMissingObjects(t *testing.T) {
	info := func(kind, ns, name string) *resource.Info {
		return &resource.Info{Namespace: ns, Name: name,
			Mapping: &meta.RESTMapping{GroupVersionKind: schema.GroupVersionKind{Group: "nvidia.com", Version: "v1", Kind: kind}}}
	}
	policy := info("ClusterPolicy", "", "cluster-policy")
	operator := info("Deployment", "gpu-operator", "gpu-operator")
	notFound := func(gone ...*resource.Info) func(*resource.Info) error {
		return func(i *resource.Info) error {
			if slices.Contains(gone, i) {
				return apierrors.NewNotFound(schema.GroupResource{Resource: "x"}, i.Name)
			}
			return nil
		}
	}
	tests := []struct {
		name    string
		get     func(*resource.Info) error
		want    []string
		wantErr bool
	}{
		{"every object there", notFound(), nil, false},
		{"a deleted cluster-scoped and a deleted namespaced object", notFound(policy, operator),
			[]string{"ClusterPolicy cluster-policy", "Deployment gpu-operator/gpu-operator"}, false},
		{"an object that cannot be read is an error, not a guess", func(*resource.Info) error { return errors.New("forbidden") }, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := missingObjects(kube.ResourceList{policy, operator}, tc.get)
			if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
				t.Errorf("got %v, %v; want %v (error: %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
