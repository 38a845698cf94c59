package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpuctl/gpuctl/internal/profile"
)

func newProfilesCmd(streams Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profiles",
		Short: "List and show the built-in values profiles",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the built-in profiles",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ps, err := profile.List()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(streams.Out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tDESCRIPTION")
			for _, p := range ps {
				name := p.Name
				if name == profile.Default {
					name += " (default)"
				}
				fmt.Fprintf(tw, "%s\t%s\n", name, p.Description)
			}
			return tw.Flush()
		},
	}, &cobra.Command{
		Use:   "show NAME",
		Short: "Print a profile's values, with the comments that say why",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p, err := profile.Get(args[0])
			if err != nil {
				return usageError{err}
			}
			_, err = streams.Out.Write(p.Source)
			return err
		},
	})
	return cmd
}
