package cli

import "github.com/spf13/cobra"

func newSimCmd(st *State) *cobra.Command {
	_ = st
	return notBuilt("sim")
}
