package engine

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gpuctl/gpuctl/internal/plan"
)

// secretMaterial reads the inputs of the Plan's Secrets before anything changes, so a missing or
// empty license input fails the run with the cluster untouched. The contents go only into the Secret
// objects it returns: never into events, values or errors.
func (i *Install) secretMaterial(p *plan.Plan) ([]map[string]any, error) {
	var out []map[string]any
	for _, s := range p.Steps {
		if s.Kind != plan.KindSecrets || s.Skip != "" {
			continue
		}
		for _, spec := range s.Secrets {
			if spec.KeepIfUnset && i.unsetSource(spec.Files[0]) {
				// A re-run without a new key keeps the Secret that exists (the plan says so).
				continue
			}
			obj, err := i.secretObject(spec)
			if err != nil {
				return nil, err
			}
			out = append(out, obj)
		}
	}
	return out, nil
}

func (i *Install) secretObject(spec plan.SecretSpec) (map[string]any, error) {
	data := map[string]any{}
	switch spec.Type {
	case "kubernetes.io/dockerconfigjson":
		key, err := i.readSource(spec.Files[0])
		if err != nil {
			return nil, fmt.Errorf("NGC API key for secret %s: %w", spec.Name, err)
		}
		key = strings.TrimSpace(key)
		// NGC takes the literal user name $oauthtoken with the API key as password (NVIDIA's "GPU
		// Operator with NVIDIA AI Enterprise" guide,
		// https://docs.nvidia.com/ai-enterprise/deployment/vmware/latest/gpu-operator.html).
		auth := base64.StdEncoding.EncodeToString([]byte("$oauthtoken:" + key))
		cfg, err := json.Marshal(map[string]any{"auths": map[string]any{spec.Server: map[string]any{
			"username": "$oauthtoken", "password": key, "auth": auth,
		}}})
		if err != nil {
			return nil, err
		}
		data[spec.Keys[0]] = base64.StdEncoding.EncodeToString(cfg)
	default:
		for n, key := range spec.Keys {
			b, err := os.ReadFile(spec.Files[n])
			if err != nil {
				return nil, fmt.Errorf("secret %s: %s: %w", spec.Name, key, err)
			}
			// gridd.conf may be empty (the same guide); the token may not.
			if len(strings.TrimSpace(string(b))) == 0 && key != plan.GriddConfKey {
				return nil, fmt.Errorf("secret %s: %s (%s) is empty", spec.Name, key, spec.Files[n])
			}
			data[key] = base64.StdEncoding.EncodeToString(b)
		}
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": spec.Type,
		"metadata": map[string]any{"name": spec.Name, "namespace": spec.Namespace,
			"labels": map[string]any{"app.kubernetes.io/managed-by": "gpuctl"}},
		"data": data,
	}, nil
}

// unsetSource is true for "env NAME" when NAME is not set.
func (i *Install) unsetSource(src string) bool {
	name, ok := strings.CutPrefix(src, "env ")
	return ok && (i.Getenv == nil || strings.TrimSpace(i.Getenv(name)) == "")
}

// readSource reads "file PATH", "stdin" or "env NAME"; an empty value is an error.
func (i *Install) readSource(src string) (string, error) {
	var v string
	switch {
	case src == "stdin":
		if i.Stdin == nil {
			return "", fmt.Errorf("no standard input")
		}
		b, err := io.ReadAll(i.Stdin)
		if err != nil {
			return "", err
		}
		v = string(b)
	case strings.HasPrefix(src, "file "):
		b, err := os.ReadFile(strings.TrimPrefix(src, "file "))
		if err != nil {
			return "", err
		}
		v = string(b)
	case strings.HasPrefix(src, "env "):
		name := strings.TrimPrefix(src, "env ")
		if i.Getenv == nil {
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		v = i.Getenv(name)
		if v == "" {
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
	default:
		return "", fmt.Errorf("unknown source %q", src)
	}
	if strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("%s is empty", src)
	}
	return v, nil
}
