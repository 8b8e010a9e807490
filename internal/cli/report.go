package cli

import "github.com/spf13/cobra"

func newReportCmd(st *State) *cobra.Command {
	_ = st
	return notBuilt("report")
}
