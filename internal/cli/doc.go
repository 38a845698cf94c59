// Package cli is gpuctl's command line: cobra commands whose flags (kubectl's global flags through
// genericclioptions, then each command's own) fill an options struct, with unset flags taken from
// GPUCTL_* environment variables or a config file (viper). Nothing else happens here: each command
// hands its options to a verb of package engine and its results to package ui.
//
// It deliberately holds no logic of its own beyond turning errors into one readable line and an exit
// code. cmd/gpuctl calls Run.
package cli
