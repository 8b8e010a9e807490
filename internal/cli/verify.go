package cli

import "github.com/spf13/cobra"

func newVerifyCmd(st *State) *cobra.Command {
	_ = st
	return notBuilt("verify")
}
