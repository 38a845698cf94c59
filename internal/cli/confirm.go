package cli

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/term"
)

// errDeclined: the user answered no; nothing was changed.
var errDeclined = errors.New("not confirmed: nothing was changed")

// interactive reports whether gpuctl may ask a question: standard input is a terminal and CI is not
// set (CI=true is set by GitHub Actions, GitLab CI and most other CI systems).
func interactive(streams Streams, getenv func(string) string) bool {
	if getenv("CI") != "" {
		return false
	}
	f, ok := streams.In.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// confirm asks question on a terminal unless yes; without a terminal (or in CI) it never asks and
// refuses unless yes, naming the flag, so a pipeline cannot hang on a prompt.
func confirm(streams Streams, getenv func(string) string, yes bool, verb, question string) error {
	if yes {
		return nil
	}
	if !interactive(streams, getenv) {
		return usageError{fmt.Errorf("%s changes the cluster and asks first; without a terminal (or with CI set) it needs --yes", verb)}
	}
	fmt.Fprintf(streams.Err, "%s [y/N] ", question)
	line, _ := bufio.NewReader(streams.In).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errDeclined
}
