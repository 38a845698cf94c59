package charts

import "embed"

// FS holds both charts, each under its own directory ("node-feature-discovery/Chart.yaml", ...).
// The all: prefix keeps templates/_helpers.tpl, which go:embed would otherwise skip.
//
//go:embed all:node-feature-discovery all:gpu-operator
var FS embed.FS

// Names lists the embedded charts in install order: NFD must label the GPU nodes before the GPU
// Operator can find them (research "What gpuctl should do", install order step 4 before 6).
func Names() []string {
	return []string{"node-feature-discovery", "gpu-operator"}
}
