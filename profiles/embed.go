package profiles

import "embed"

// FS holds every profile, named <profile>.yaml. It is read-only.
//
//go:embed *.yaml
var FS embed.FS
