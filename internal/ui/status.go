package ui

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gpuctl/gpuctl/internal/engine"
)

// PrintStatus prints gpuctl status for people, in the manner of `linkerd check`: one line per check
// with its verdict (and a hint under a failed one), then the GPU nodes' table.
func PrintStatus(w io.Writer, r *engine.StatusResult, style Style) error {
	b := &strings.Builder{}
	for _, c := range r.Checks {
		mark := style.ok()
		switch c.State {
		case engine.CheckWarning:
			mark = style.warn()
		case engine.CheckFailed:
			mark = style.fail()
		case engine.CheckNotInstalled:
			// Nothing to check is not a failed check: no mark, no check name.
			fmt.Fprintf(b, "not installed: %s\n", c.Message)
			if c.Hint != "" {
				fmt.Fprintf(b, "    hint: %s\n", c.Hint)
			}
			continue
		}
		fmt.Fprintf(b, "%s %s: %s\n", mark, c.Name, c.Message)
		if c.Hint != "" && c.State != engine.CheckOK {
			fmt.Fprintf(b, "    hint: %s\n", c.Hint)
		}
	}
	if len(r.Nodes) > 0 {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
		dra := r.Nodes[0].DRADriver != ""
		if dra {
			// A DRA stack (--dra): no device plugin and no allocatable nvidia.com/gpu; the DRA driver and
			// the devices its ResourceSlices publish instead.
			fmt.Fprintln(tw, "NODE\tPOOL\tVALIDATED\tGPUS\tPRODUCT\tDRIVER\tDRA DRIVER\tRESOURCESLICES\tDEVICES\tTAINTED\tDRIVER UPGRADE")
			for _, n := range r.Nodes {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", n.Name, OrNone(n.Pool, "-"), yesNo(n.Validated), n.GPUs, OrNone(n.Product, "-"),
					n.Driver, n.DRADriver, n.ResourceSlices, n.Devices, yesNo(n.Tainted), OrNone(n.DriverUpgradeState, "-"))
			}
		} else {
			fmt.Fprintln(tw, "NODE\tPOOL\tVALIDATED\tGPUS\tPRODUCT\tALLOCATABLE\tDRIVER\tTOOLKIT\tDEVICE PLUGIN\tTAINTED\tDRIVER UPGRADE")
			for _, n := range r.Nodes {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", n.Name, OrNone(n.Pool, "-"), yesNo(n.Validated), n.GPUs, OrNone(n.Product, "-"), n.Allocatable,
					n.Driver, n.Toolkit, n.DevicePlugin, yesNo(n.Tainted), OrNone(n.DriverUpgradeState, "-"))
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(r.Pools) > 0 {
			b.WriteString("\n")
			printPoolStatus(tw, r.Pools, dra)
		}
		return finishStatus(w, b, tw, r, style)
	}
	return finishStatus(w, b, nil, r, style)
}

// printPoolStatus prints the GPU node pools' table: on a DRA stack the DRA driver's kubelet plugins and
// what they publish, else the device plugin's sharing, MIG and what the nodes advertise.
func printPoolStatus(tw *tabwriter.Writer, pools []engine.PoolStatus, dra bool) {
	if dra {
		fmt.Fprintln(tw, "POOL\tNODES\tDRA DRIVER\tRESOURCESLICES\tDEVICES")
		for _, p := range pools {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\n", p.Name, len(p.Nodes), p.DRADriver, p.ResourceSlices, p.Devices)
		}
		return
	}
	fmt.Fprintln(tw, "POOL\tNODES\tPLUGIN CONFIG\tSHARING\tREPLICAS\tMIG STRATEGY\tMIG CONFIG\tMIG STATE\tADVERTISED")
	for _, p := range pools {
		replicas := "-"
		if p.Replicas > 0 {
			replicas = strconv.Itoa(p.Replicas)
		}
		var advertised []string
		for _, res := range slices.Sorted(maps.Keys(p.Advertised)) {
			advertised = append(advertised, res+"="+strconv.FormatInt(p.Advertised[res], 10))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, len(p.Nodes), OrNone(p.DevicePluginConfig, "-"), OrNone(p.Sharing, "-"), replicas,
			OrNone(p.MIGStrategy, "-"), OrNone(p.MIGConfig, "-"), OrNone(p.MIGConfigState, "-"), OrNone(strings.Join(advertised, ", "), "-"))
	}
}

// finishStatus flushes the nodes' table (tw, nil for none) and adds the verdict line.
func finishStatus(w io.Writer, b *strings.Builder, tw *tabwriter.Writer, r *engine.StatusResult, style Style) error {
	if tw != nil {
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	switch {
	case !r.Installed:
	case r.Healthy:
		fmt.Fprintf(b, "\nStatus: %s healthy\n", style.ok())
	default:
		fmt.Fprintf(b, "\nStatus: %s not ready\n", style.fail())
	}
	_, err := io.WriteString(w, b.String())
	return err
}
