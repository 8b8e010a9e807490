package cli

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/coordinate"
)

func newCoordinateCmd(st *State) *cobra.Command {
	var (
		workers        int
		listen         string
		startAt        string
		margin         time.Duration
		barrierTimeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "coordinate --workers N --listen HOST:PORT",
		Short: "Serve the coordinator of a split plan's workers: clock offsets and one release per wave",
		Long: `Serve the coordinator of the N workers of a split plan (rehearse run or bench
with --segment i/N --coordinator URL, SPEC §10). Each worker measures its clock
offset against GET /v1/time (the sample of least round trip, NTP-style, with
half that round trip as its uncertainty), then, before each wave, posts that it
is ready and waits at the wave's barrier; once all N are there the coordinator
answers every worker with one release instant (the last arrival plus
--margin; the first wave not before --start-at, or a worker's own --start-at),
which each worker turns into its own clock with its offset. A worker that does
not come within --barrier-timeout makes the others stop with an error naming
it; what they recorded stays in their bundles. The workers must run the same
plan: one with another plan digest, another count, or a segment another
worker already runs is refused; a worker whose wait at a barrier ends (it
died, its connection closed) no longer counts there, and its restart is
accepted. Every request must carry the shared token in $REHEARSE_COORDINATOR_TOKEN
(the coordinator's and each worker's environment); without one the
coordinator listens on loopback only. Connections are bounded (64 plus two
per worker at once; 10 s for a header or a body, 60 s idle). The coordinator
exits once all N workers reported done, or on Ctrl-C.`,
		Example: `  export REHEARSE_COORDINATOR_TOKEN=$(openssl rand -hex 32)   # the same for every worker
  rehearse coordinate --workers 4 --listen 0.0.0.0:7070
  rehearse bench --base-url http://10.0.0.5:8000 --concurrency 64 --segment 0/4 --coordinator http://10.0.0.2:7070`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if workers < 1 {
				return usageError("--workers %d: want the number of workers, at least 1", workers)
			}
			if listen == "" {
				return usageError("--listen HOST:PORT is required")
			}
			token := os.Getenv(coordinate.TokenEnv)
			if token == "" && coordinate.NeedsToken(listen) {
				return usageError("--listen %s can be reached from other machines: set %s to a shared secret (the workers need the same), or listen on 127.0.0.1", listen, coordinate.TokenEnv)
			}
			s := &coordinate.Server{Workers: workers, Margin: margin, Timeout: barrierTimeout, Token: token}
			if startAt != "" {
				t, err := time.Parse(time.RFC3339Nano, startAt)
				if err != nil {
					return usageError("--start-at %q: want an RFC 3339 instant", startAt)
				}
				s.StartAt = t
			}
			return s.Run(cmd.Context(), listen, st.Stderr)
		},
	}
	f := cmd.Flags()
	f.IntVar(&workers, "workers", 0, "how many workers take part (the N of their --segment i/N)")
	f.StringVar(&listen, "listen", "", "address to serve on, HOST:PORT (e.g. 0.0.0.0:7070; port 0 picks a free one)")
	f.StringVar(&startAt, "start-at", "", "RFC 3339 instant before which the first wave is not released")
	f.DurationVar(&margin, "margin", time.Duration(config.DefaultReleaseMargin*float64(time.Second)), "how long after the last worker reached a barrier its wave is released")
	f.DurationVar(&barrierTimeout, "barrier-timeout", time.Duration(config.DefaultBarrierTimeout)*time.Second, "how long a worker waits at a barrier for the others")
	return cmd
}
