package nfd

import (
	"testing"
)

func TestUpstreamImage(t *testing.T) {
	for _, tc := range []struct {
		image string
		want  bool
	}{
		{"registry.k8s.io/nfd/node-feature-discovery:v0.19.0", true},
		{"mirror.example.com:5000/nfd/node-feature-discovery:v0.19.0-minimal", true},
		{"registry.k8s.io/nfd/node-feature-discovery:v0.17.3", false},
		{"registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:v4.18", false},
		{"registry.k8s.io/nfd/node-feature-discovery", false},
	} {
		t.Run(tc.image, func(t *testing.T) {
			if got := upstreamImage(tc.image); got != tc.want {
				t.Errorf("upstreamImage(%q) = %v, want %v", tc.image, got, tc.want)
			}
		})
	}
}
