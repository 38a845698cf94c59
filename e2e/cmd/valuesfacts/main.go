// Command valuesfacts regenerates internal/bundle/values_facts.json (`make values-facts`): which values
// keys NVIDIA's GPU Operator chart of each release reads, their scalar defaults and the keys NVIDIA
// renamed, derived from NVIDIA's sources of each release (e2e/upstream; no network). See package
// e2e/valuesfacts.
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/gpuctl/gpuctl/e2e/upstream"
	"github.com/gpuctl/gpuctl/e2e/valuesfacts"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "valuesfacts:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root, err := upstream.RepoRoot()
	if err != nil {
		return err
	}
	b, err := valuesfacts.Generate(ctx, valuesfacts.Tags())
	if err != nil {
		return err
	}
	path := filepath.Join(root, valuesfacts.File)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		fmt.Println("values facts up to date")
		return nil
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	fmt.Println(valuesfacts.File)
	return nil
}
