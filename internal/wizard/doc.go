// Package wizard is gpuctl's interactive front end (`gpuctl wizard`, `gpuctl install --interactive`):
// a Bubble Tea program that walks a person through choosing the kube context, reading what detection
// and the preflight checks found, making the few choices gpuctl cannot detect, reviewing the Plan, and
// watching the install.
//
// It is a front end only. It fills engine.InstallOptions, shows the Plan engine.Check builds for
// them, runs engine.Install with a Confirm callback that accepts exactly the Plan the person reviewed,
// and renders the same engine.Event stream the command line renders. It decides nothing about the
// install itself, and it never sees a secret except the NGC key a person types, which it hands to the
// engine as the value of the environment variable the saved config names and never writes anywhere.
//
// The CLI (internal/cli) wires it to a cluster through the Backend interface; tests use a fake.
package wizard
