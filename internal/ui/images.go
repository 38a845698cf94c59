package ui

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gpuctl/gpuctl/internal/render"
)

// PrintImages prints an image list for people: one image per line with what pulls it, then the
// release, the node OSes the OS-specific images are listed for, and what is not listed.
func PrintImages(w io.Writer, l *render.ImageList) error {
	b := &strings.Builder{}
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tUSED BY")
	for _, img := range l.Images {
		fmt.Fprintf(tw, "%s\t%s\n", img.Image, strings.Join(img.UsedBy, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(b, "\n%d images for GPU Operator %s, profile %s", len(l.Images), l.OperatorVersion, l.Profile)
	if l.Registry != "" {
		fmt.Fprintf(b, ", rewritten to --registry %s", l.Registry)
	}
	fmt.Fprintf(b, ".\nOS-specific images are listed for %s (%s).\n", strings.Join(l.NodeOS, ", "), l.NodeOSFrom)
	if len(l.Notes) > 0 {
		fmt.Fprintln(b, "Not listed:")
		for _, n := range l.Notes {
			fmt.Fprintf(b, "  - %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
