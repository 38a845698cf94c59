// Package ui renders gpuctl's event stream for people and machines: a spinner with one line per
// finished step on a terminal, plain timestamped lines when output is not a terminal (CI logs), and
// one JSON object per line with -o json. It also prints the final results (plans, detection, install
// summary) on stdout.
//
// It deliberately decides nothing: it only formats engine events and values it is handed. Progress
// goes to stderr and results to stdout; colour and symbols (✔ ‼ ×) appear only on a terminal without
// NO_COLOR. The CLI and the wizard call it.
package ui
