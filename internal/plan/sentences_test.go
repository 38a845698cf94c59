package plan

import (
	"slices"
	"strings"
	"testing"
)

// A plan's words are read by people: every step's why and every warning is a whole sentence, not
// one cut off after a modal verb or a conjunction (gpuctl issue 36, item 6: "…; every GPU DaemonSet
// must"), and no warning is said twice.
func TestThePlansWordsAreWholeSentences(t *testing.T) {
	dangling := []string{"must", "should", "can", "and", "or", "to", "the", "a", "of", ",", ";", ":"}
	for _, distro := range []string{"kubeadm", "gke", "openshift", "rke2"} {
		t.Run(distro, func(t *testing.T) {
			p := build(t, detection(distro), Options{})
			texts := map[string]string{}
			for _, s := range p.Steps {
				texts["step "+s.ID+"'s why"] = s.Why
			}
			for i, w := range p.Warnings {
				texts["warning "+string(rune('1'+i))] = w
			}
			for what, text := range texts {
				words := strings.Fields(strings.TrimSpace(text))
				if len(words) == 0 {
					continue
				}
				last := strings.ToLower(words[len(words)-1])
				if slices.Contains(dangling, last) || slices.ContainsFunc(dangling, func(d string) bool { return len(d) == 1 && strings.HasSuffix(last, d) }) {
					t.Errorf("%s stops mid-sentence: %q", what, text)
				}
			}
			seen := map[string]bool{}
			for _, w := range p.Warnings {
				if seen[w] {
					t.Errorf("warning said twice: %q", w)
				}
				seen[w] = true
			}
		})
	}
}
