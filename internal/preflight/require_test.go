package preflight

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

func TestRequire(t *testing.T) {
	perms := []Permission{
		{Verb: "create", Resource: "pods", Namespace: "gpu-operator"},
		{Verb: "delete", Resource: "pods", Namespace: "gpu-operator"},
		{Verb: "create", Group: "resource.k8s.io", Resource: "resourceclaimtemplates", Namespace: "gpu-operator"},
		{Verb: "delete", Resource: "pods", Namespace: "gpu-operator"}, // asked once, named once
	}
	for _, tc := range []struct {
		name    string
		allow   authorizer
		unsure  bool
		wantErr string
		asks    int64 // 0: not counted
	}{
		{name: "every permission granted", allow: allowExcept()},
		{name: "cluster-admin is asked one question", allow: allowAll, asks: 1},
		{name: "one missing is named", allow: allowExcept("delete pods in gpu-operator"),
			wantErr: "preflight checks failed: verify needs them, and you may not delete pods in gpu-operator (docs/rbac.yaml grants what gpuctl needs)"},
		{name: "each missing one is named once, in the order asked", allow: allowExcept("delete pods in gpu-operator", "create resource.k8s.io/resourceclaimtemplates in gpu-operator"),
			wantErr: "preflight checks failed: verify needs them, and you may not delete pods in gpu-operator, create resource.k8s.io/resourceclaimtemplates in gpu-operator (docs/rbac.yaml grants what gpuctl needs)"},
		{name: "an API server that cannot answer refuses nothing", allow: allowExcept("delete pods in gpu-operator"), unsure: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube, asked := fakeKube(tc.allow)
			if tc.unsure {
				kube.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("the server could not find the requested resource")
				})
			}
			err := Require(t.Context(), kube, "verify needs them", perms)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if n := asked.Load(); tc.asks > 0 && n != tc.asks {
					t.Errorf("asked %d questions, want %d", n, tc.asks)
				}
				return
			}
			if !errors.Is(err, ErrFailed) || err.Error() != tc.wantErr {
				t.Errorf("err = %v\nwant %s", err, tc.wantErr)
			}
			if n := asked.Load(); n != 4 {
				t.Errorf("asked %d questions, want 4 (may I do anything, then the 3 distinct ones)", n)
			}
		})
	}
}
