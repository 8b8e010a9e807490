package cli

import "github.com/spf13/cobra"

func newMergeCmd(st *State) *cobra.Command {
	_ = st
	return notBuilt("merge")
}
