package cli

import "github.com/spf13/cobra"

func newRunCmd(st *State) *cobra.Command {
	_ = st
	return notBuilt("run")
}
