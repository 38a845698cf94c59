package plan

import "reflect"

// PullSecretSource is the Source of the --image-pull-secret values layer.
func PullSecretSource(names []string) string {
	s := "--image-pull-secret"
	for i, n := range names {
		if i > 0 {
			s += ","
		}
		s += " " + n
	}
	return s
}

// PullSecretLayer returns the values that give every image of a release the pull secrets names.
// NVIDIA's convention (the gpu-operator chart, and each operand of the ClusterPolicy) is a list of
// Secret names beside each image's repository: operator.imagePullSecrets, driver.imagePullSecrets,
// driver.manager.imagePullSecrets, …; charts that set them for all their pods at the top level (NFD's,
// gke-driver-installer's: topLevel) take Kubernetes LocalObjectReferences ([{name: …}]). Preloaded
// images (pull policy Never) need none. effective are the values the layer goes over.
func PullSecretLayer(names []string, effective map[string]any, topLevel bool) map[string]any {
	if len(names) == 0 {
		return map[string]any{}
	}
	if topLevel {
		refs, _ := cloneValue(effective["imagePullSecrets"]).([]any)
		for _, n := range names {
			if ref := map[string]any{"name": n}; !containsValue(refs, ref) {
				refs = append(refs, ref)
			}
		}
		return normalized(map[string]any{"imagePullSecrets": refs})
	}
	out := map[string]any{}
	var walk func(m map[string]any, path []string)
	walk = func(m map[string]any, path []string) {
		if repo, ok := m["repository"].(string); ok && repo != "" && m["pullPolicy"] != "Never" && m["imagePullPolicy"] != "Never" {
			// A list replaces the one below it (Helm's merge): keep the secrets the profile names
			// (NVIDIA AI Enterprise's ngc-secret) and add ours.
			list, _ := cloneValue(m["imagePullSecrets"]).([]any)
			for _, n := range names {
				if !containsValue(list, n) {
					list = append(list, n)
				}
			}
			set(out, list, append(append([]string(nil), path...), "imagePullSecrets")...)
		}
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				walk(sub, append(append([]string(nil), path...), k))
			}
		}
	}
	walk(effective, nil)
	return normalized(out)
}

func containsValue(list []any, v any) bool {
	for _, x := range list {
		if reflect.DeepEqual(x, v) {
			return true
		}
	}
	return false
}
