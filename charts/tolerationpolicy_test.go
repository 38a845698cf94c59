package charts

import (
	"reflect"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

// mapKind is what Helm's Capabilities list for a cluster that serves MutatingAdmissionPolicy at v1
// (Kubernetes 1.36 and newer).
const mapKind = "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"

// TestGPUTolerationPolicy: gpuctl's MutatingAdmissionPolicy and its binding render only when the value
// asks for them and the cluster serves the API, and then as valid objects of that API: a policy for
// creating and updating pods, leaving the probe's pods alone, that adds exactly the toleration
// ExtendedResourceToleration adds.
func TestGPUTolerationPolicy(t *testing.T) {
	on := map[string]any{"gpuTolerationPolicy": map[string]any{"enabled": true}}
	tests := []struct {
		name   string
		vals   map[string]any
		served bool
		want   bool
	}{
		{"off by default, so NVIDIA's values render as with NVIDIA's chart", map[string]any{}, true, false},
		{"on and served", on, true, true},
		{"on, but the cluster does not serve the API (Kubernetes 1.35 and older)", on, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var extra []string
			if tc.served {
				extra = append(extra, mapKind)
			}
			manifests := mustRender(t, gpuChart, tc.vals, capabilities(t, extra...))
			policy, pok := manifests["gpu-operator/templates/mutatingadmissionpolicy.yaml"]
			binding, bok := manifests["gpu-operator/templates/mutatingadmissionpolicybinding.yaml"]
			if pok != tc.want || bok != tc.want {
				t.Fatalf("policy rendered %v, binding %v; want %v", pok, bok, tc.want)
			}
			if !tc.want {
				return
			}
			var p admissionregistrationv1.MutatingAdmissionPolicy
			if err := yaml.UnmarshalStrict([]byte(policy), &p); err != nil {
				t.Fatalf("policy: %v\n%s", err, policy)
			}
			var b admissionregistrationv1.MutatingAdmissionPolicyBinding
			if err := yaml.UnmarshalStrict([]byte(binding), &b); err != nil {
				t.Fatalf("binding: %v\n%s", err, binding)
			}
			if b.Spec.PolicyName != p.Name || p.Name != "gpuctl-gpu-toleration" {
				t.Errorf("binding %s binds %q, policy is %q", b.Name, b.Spec.PolicyName, p.Name)
			}
			rules := p.Spec.MatchConstraints.ResourceRules
			if len(rules) != 1 || !reflect.DeepEqual(rules[0].Resources, []string{"pods"}) ||
				!reflect.DeepEqual(rules[0].Operations, []admissionregistrationv1.OperationType{"CREATE", "UPDATE"}) {
				t.Errorf("rules %+v", rules)
			}
			sel := p.Spec.MatchConstraints.ObjectSelector
			if sel == nil || len(sel.MatchExpressions) != 1 || sel.MatchExpressions[0].Key != "gpuctl.io/toleration-probe" || sel.MatchExpressions[0].Operator != "DoesNotExist" {
				t.Errorf("object selector %+v: the probe's pods must be left alone", sel)
			}
			if len(p.Spec.Mutations) != 1 || p.Spec.Mutations[0].PatchType != admissionregistrationv1.PatchTypeJSONPatch || p.Spec.Mutations[0].JSONPatch == nil {
				t.Errorf("mutations %+v", p.Spec.Mutations)
			}
			if len(p.Spec.MatchConditions) != 2 {
				t.Errorf("match conditions %+v", p.Spec.MatchConditions)
			}
		})
	}
}
