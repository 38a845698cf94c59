package uninstall

import (
	"fmt"
	"testing"
)

func TestAKeptNamespaceNamesTheFirstTenAndCountsTheRest(t *testing.T) {
	var foreign []string
	for i := range 13 {
		foreign = append(foreign, fmt.Sprintf("ConfigMap c%02d", i))
	}
	got := keptNamespace("gpu-operator", foreign).String()
	want := "namespace gpu-operator: it holds ConfigMap c00, ConfigMap c01, ConfigMap c02, ConfigMap c03, ConfigMap c04, ConfigMap c05, " +
		"ConfigMap c06, ConfigMap c07, ConfigMap c08, ConfigMap c09 and 3 more, which gpuctl did not create"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
