// Command gpuctl takes a Kubernetes cluster from "GPU nodes have joined" to "GPUs are validated and
// schedulable". All of it lives in internal/; this is the process boundary.
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gpuctl/gpuctl/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first Ctrl-C stops the run at its next safe point and prints where it stopped; after it,
	// the signals' default action is back, so a second Ctrl-C ends the process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	// Installed as kubectl-gpu, gpuctl is the kubectl plugin `kubectl gpu`.
	program := strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe")
	code := cli.RunAs(ctx, program, cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.Args[1:], os.Getenv)
	stop()
	os.Exit(code)
}
