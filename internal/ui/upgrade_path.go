package ui

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpuctl/gpuctl/internal/engine"
)

// PrintUpgradePath prints what an upgrade of more than one hop will change: its path and why (NVIDIA
// supports an upgrade within a major release or to the next one only), then each hop's preview as
// PrintUpgradePreview prints a one-hop upgrade's, value changes included.
func PrintUpgradePath(w io.Writer, previews []*engine.UpgradePreview, style Style) error {
	if len(previews) == 0 {
		return nil
	}
	path := UpgradePathReleases(previews)
	head := fmt.Sprintf("GPU Operator %s → %s", path[0], path[len(path)-1])
	if len(path) > 2 {
		head += " through " + strings.Join(path[1:len(path)-1], ", ")
	}
	_, err := fmt.Fprintf(w, "%s, in %d upgrades: NVIDIA supports an upgrade within a major release or to the next one only.\n"+
		"Each is its own Helm revision of every release that changes, CRDs first, and the stack is healthy before the next.\n", head, len(previews))
	if err != nil {
		return err
	}
	for i, p := range previews {
		if _, err := fmt.Fprintf(w, "\n=== Upgrade %d/%d ===\n", i+1, len(previews)); err != nil {
			return err
		}
		if err := PrintUpgradePreview(w, p, style); err != nil {
			return err
		}
	}
	return nil
}

// UpgradePathReleases are the releases previews go through, the installed one first.
func UpgradePathReleases(previews []*engine.UpgradePreview) []string {
	var path []string
	for i, p := range previews {
		if i == 0 && p.From != "" {
			path = append(path, p.From)
		}
		if len(path) == 0 || path[len(path)-1] != p.To {
			path = append(path, p.To)
		}
	}
	return path
}

// PrintUpgradePathDone prints the path an upgrade of more than one hop went through.
func PrintUpgradePathDone(w io.Writer, path []string, hops int) error {
	_, err := fmt.Fprintf(w, "GPU Operator %s: %d upgrades, each healthy before the next.\n", strings.Join(path, " → "), hops)
	return err
}
