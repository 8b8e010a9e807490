package cli

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/examples"
	"github.com/rehearse/rehearse/internal/benchcmd"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/rehearsal"
)

// defaultDemoTimeScale makes the whole demo take about a minute on a 2-core
// machine: the serial engine's series needs about 530 s of simulated time.
const defaultDemoTimeScale = 10

type demoOptions struct {
	outDir    string
	timeScale float64
	capacity  bool
	quiet     bool
	progress  string
}

func newDemoCmd(st *State) *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo [-o DIR] [--time-scale K]",
		Short: "Run the canonical rehearsal against two simulated servers and write a verified bundle",
		Long: `Run the canonical rehearsal (1, 8, 32 and 64 clients, 3 repeats, eight prompts,
128 tokens, 60 s timeout, a 64-client mechanism check on the batching server)
against two simulated servers: a lock-serialized engine and a continuous-
batching engine, each a "rehearse sim" child process on a free loopback port,
with profiles fitted to the seed's T4 table. It goes through the same path as
"rehearse run" (the rehearsal file is examples/simulated.yaml, embedded), then
writes and verifies the bundle and prints the results table.

Simulated time runs K times faster than the wall clock (--time-scale); the
client timeout and the metric's polling period are scaled with it. Every
figure is measured on the wall clock at that scale, and the bundle says
plainly that the servers were simulated: no figure is a GPU measurement.

With --capacity it runs examples/capacity.yaml (embedded) instead: a
capacity search of both simulated servers under an SLO (SPEC §8), at time
scale 50 by default, in about half a minute.`,
		Example: `  rehearse demo
  rehearse demo -o /tmp/demo --time-scale 20
  rehearse demo --capacity`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.timeScale <= 0 || math.IsInf(o.timeScale, 0) || math.IsNaN(o.timeScale) {
				return usageError("demo: --time-scale %v: want a positive number", o.timeScale)
			}
			if err := benchcmd.CheckProgress(o.progress); err != nil {
				return err
			}
			cwd, err := os.Getwd()
			if err != nil {
				return err
			}
			file, name := examples.Simulated, "examples/simulated.yaml (embedded)"
			if o.capacity {
				file, name = examples.Capacity, "examples/capacity.yaml (embedded)"
				if !cmd.Flags().Changed("time-scale") {
					o.timeScale = defaultCapacityDemoTimeScale
				}
			}
			cfg, err := config.Parse(file, name, cwd)
			if err != nil {
				return err
			}
			if err := rehearsal.ScaleSimulated(cfg, o.timeScale); err != nil {
				return err
			}
			dir := o.outDir
			if dir == "" {
				dir = "rehearse-demo-" + time.Now().UTC().Format("20060102T150405Z")
			}
			start := time.Now()
			job := rehearsal.Job{Rehearsal: cfg, Dir: dir, Command: demoCommand(dir, o)}
			err = runRehearsal(cmd.Context(), st, job, o.quiet, o.progress)
			fmt.Fprintf(st.Stdout, "The demo took %.0f s of wall time at time scale %g.\n", time.Since(start).Seconds(), o.timeScale)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.outDir, "output", "o", "", "bundle folder (default rehearse-demo-TIME in the current folder)")
	f.Float64Var(&o.timeScale, "time-scale", defaultDemoTimeScale, "simulated time runs K times faster than the wall clock")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress lines on stderr")
	f.BoolVar(&o.capacity, "capacity", false, "search both servers' capacity under an SLO instead (examples/capacity.yaml; default --time-scale 50)")
	benchcmd.ProgressFlag(f, &o.progress)
	return cmd
}

// defaultCapacityDemoTimeScale is examples/capacity.yaml's own scale.
const defaultCapacityDemoTimeScale = 50

func demoCommand(dir string, o demoOptions) []string {
	argv := []string{"rehearse", "demo", "-o", dir, "--time-scale", strconv.FormatFloat(o.timeScale, 'g', -1, 64)}
	if o.capacity {
		argv = append(argv, "--capacity")
	}
	return argv
}
