package cli

import "github.com/spf13/cobra"

func newTokensCmd(st *State) *cobra.Command {
	_ = st
	return notBuilt("tokens")
}
