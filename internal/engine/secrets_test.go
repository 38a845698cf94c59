package engine

import (
	"testing"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/plan"
)

func TestSecretMaterialKeepsAnExistingSecretWithoutANewKey(t *testing.T) {
	p := &plan.Plan{Steps: []plan.Step{{ID: "licensing", Kind: plan.KindSecrets, Secrets: []plan.SecretSpec{{
		Name: detect.NGCPullSecret, Namespace: "gpu-operator", Type: "kubernetes.io/dockerconfigjson",
		Keys: []string{".dockerconfigjson"}, Files: []string{"env NGC_API_KEY"}, Server: plan.NGCRegistry, KeepIfUnset: true,
	}}}}}
	t.Run("the variable unset keeps the Secret", func(t *testing.T) {
		objs, err := (&Install{Getenv: func(string) string { return "" }}).secretMaterial(p)
		if err != nil || len(objs) != 0 {
			t.Errorf("objects %d, err %v; want none and no error", len(objs), err)
		}
	})
	t.Run("the variable set replaces it", func(t *testing.T) {
		objs, err := (&Install{Getenv: func(string) string { return "nvapi-x" }}).secretMaterial(p)
		if err != nil || len(objs) != 1 {
			t.Errorf("objects %d, err %v; want the Secret", len(objs), err)
		}
	})
	t.Run("without KeepIfUnset an unset variable is an error", func(t *testing.T) {
		p.Steps[0].Secrets[0].KeepIfUnset = false
		if _, err := (&Install{Getenv: func(string) string { return "" }}).secretMaterial(p); err == nil {
			t.Error("no error for a missing NGC key")
		}
	})
}
