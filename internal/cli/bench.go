package cli

import "github.com/spf13/cobra"

func newBenchCmd(st *State) *cobra.Command {
	_ = st
	return notBuilt("bench")
}
