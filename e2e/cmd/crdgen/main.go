// Command crdgen regenerates the gpu-operator chart's CRDs from each GPU Operator release's api/
// types with controller-gen (`make crds`): the default release's into charts/gpu-operator/crds/, the
// others' into charts/gpu-operator/releases/<tag>/crds/. It builds controller-gen on first use
// (e2e/tools/controller-gen); the generation itself needs no network. See package e2e/crdgen.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/gpuctl/gpuctl/e2e/crdgen"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "crdgen:", err)
		os.Exit(1)
	}
}

func run() error {
	buildOnly := flag.Bool("build-only", false, "only build controller-gen into the tool cache (CI does this before the tests, so the regeneration test needs no network)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root, err := crdgen.RepoRoot()
	if err != nil {
		return err
	}
	cg, err := crdgen.ControllerGen(ctx, os.Stderr)
	if err != nil {
		return err
	}
	if *buildOnly {
		fmt.Println(cg)
		return nil
	}
	files, err := crdgen.Generate(ctx, cg, crdgen.Releases(), os.Stderr)
	if err != nil {
		return err
	}
	changed, err := crdgen.Write(filepath.Join(root, crdgen.ChartDir), files)
	if err != nil {
		return err
	}
	for _, c := range changed {
		fmt.Println(c)
	}
	if len(changed) == 0 {
		fmt.Println("CRDs up to date")
	}
	return nil
}
