package cli

import "github.com/spf13/cobra"

func newCompareCmd(st *State) *cobra.Command {
	_ = st
	return notBuilt("compare")
}
