package cli

import "github.com/spf13/cobra"

func newDemoCmd(st *State) *cobra.Command {
	_ = st
	return notBuilt("demo")
}
