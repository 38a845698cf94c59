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
// The rooms:
//
//   - The shell (shell.go, frame.go) is Model: it keeps the window size, the help and the spinner,
//     routes each message to the screen shown, and draws the chrome (the header naming the steps,
//     the scrolled body, the status line and the keys). The screens are a stack; moving forward
//     pushes a new screen, going back pops (screen.go, the routeMsg of session.go).
//   - The screens (screen_*.go) are one Bubble Tea model each, with its own Init, Update and View:
//     context, detect, choices, review, install. A screen asks the shell to move, or to quit, with a
//     message; it never reaches into another screen.
//   - The session (session.go) is what a screen knows: the shared env (Config, styles, keys, window,
//     spinner) and the answers of the screens before it (the context, the detection, the options,
//     the reviewed Plan). Moving forward hands the next screen a copy with one more answer, so a
//     screen made anew after going back starts from what is there now: nothing is reset by hand.
//   - The backend (backend.go) is all the wizard needs of a cluster: the CLI (internal/cli) wires it
//     to engine.Check and engine.Install for the chosen context; tests use a fake. run.go runs
//     engine.Install in its own goroutine and turns what it reports into messages.
//   - choices.go holds the questions and how answers become engine.InstallOptions; config.go the
//     config file and command line that replay them; summary.go what is printed after the program.
package wizard
