package detect

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpuctl/gpuctl/internal/distro"
)

// MinConfidence is what a distribution-specific detector must reach to be chosen over the kubeadm
// fallback. A cloud providerID alone (30) is not enough: kubeadm, RKE2 or OpenShift on a cloud VM
// carry the same providerID as the cloud's managed Kubernetes.
const MinConfidence = 50

// chooseDistribution scores every distribution package distro knows by its signals, in distro.All's
// order (which also breaks ties), and picks the most confident one at or above MinConfidence; where
// none reaches it, the fallback distribution (kubeadm), marked as a guess.
func chooseDistribution(v *view) (candidates []Candidate, best Candidate) {
	order := map[string]int{}
	fallbacks := map[string]bool{}
	var fallback Candidate
	for i, d := range distro.All() {
		order[d.Name] = i
		ev, version := v.evidence(d.Signals)
		if version == "" {
			version = v.serverVersion
		}
		c := Candidate{Name: d.Name, Description: d.Title, Version: version, Confidence: confidence(ev), Evidence: ev}
		if d.Fallback {
			fallback = c
			fallbacks[d.Name] = true
		}
		if c.Confidence > 0 {
			candidates = append(candidates, c)
		}
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		if candidates[i].Confidence != candidates[j].Confidence {
			return candidates[i].Confidence > candidates[j].Confidence
		}
		return order[candidates[i].Name] < order[candidates[j].Name]
	})
	for i, c := range candidates {
		if !fallbacks[c.Name] && c.Confidence >= MinConfidence {
			candidates[i].Evidence = append(candidates[i].Evidence, conflicts(c, candidates, fallbacks)...)
			return candidates, candidates[i]
		}
	}
	// kubeadm is the fallback: upstream defaults (containerd in its standard places) are the right
	// starting point for any cluster we cannot name. Fallback marks a guess, not a kubeadm cluster.
	if fallback.Confidence < MinConfidence {
		fallback.Fallback = true
		fallback.Evidence = append(fallback.Evidence, Evidence{
			Signal: "fallback",
			Value: fmt.Sprintf("no distribution-specific detector reached the minimum confidence (%d): no platform-unique signal was seen, "+
				"so upstream (kubeadm) defaults are assumed; low confidence", MinConfidence),
			Source: "gpuctl",
		})
		if hints := weakHints(candidates, fallbacks); hints != "" {
			fallback.Evidence = append(fallback.Evidence, Evidence{Signal: "weak hints", Value: hints, Source: "gpuctl"})
		}
	}
	return candidates, fallback
}

// uniqueWeight is the weight from which a signal counts as unique to its distribution (distro.Signal).
const uniqueWeight = 60

// conflicts is evidence, of no weight, that another distribution's unique signals were seen too: a mixed or
// relabelled cluster, or nodes copied from elsewhere. The fallback (kubeadm) does not conflict: TKGS and many
// others are built with it.
func conflicts(best Candidate, candidates []Candidate, fallbacks map[string]bool) []Evidence {
	var out []Evidence
	for _, c := range candidates {
		if c.Name == best.Name || fallbacks[c.Name] {
			continue
		}
		for _, e := range c.Evidence {
			if e.Weight >= uniqueWeight {
				out = append(out, Evidence{
					Signal: "conflict",
					Value:  fmt.Sprintf("%s's own signals were seen too (confidence %d): %s %s", c.Name, c.Confidence, e.Signal, e.Value),
					Source: e.Source,
				})
				break
			}
		}
	}
	return out
}

// weakHints lists the candidates that found something but too little, strongest first; the fallback's own
// signals are not hints.
func weakHints(candidates []Candidate, fallbacks map[string]bool) string {
	var parts []string
	for _, c := range candidates {
		if fallbacks[c.Name] || len(c.Evidence) == 0 {
			continue
		}
		e := c.Evidence[0]
		for _, x := range c.Evidence[1:] {
			if x.Weight > e.Weight {
				e = x
			}
		}
		parts = append(parts, fmt.Sprintf("%s %d (%s %s)", c.Name, c.Confidence, e.Signal, e.Value))
	}
	return strings.Join(parts, "; ")
}
