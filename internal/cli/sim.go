package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/sim"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// simShutdownGrace bounds how long rehearse sim waits for connections to
// close after SIGTERM; streams in flight are aborted first.
const simShutdownGrace = 5 * time.Second

// crashExit ends the process for the crash fault; tests replace it.
var crashExit = func(code int) { os.Exit(code) }

type simOptions struct {
	engine        string
	profile       string
	listProfiles  bool
	model         string
	host          string
	port          int
	portFile      string
	timeScale     float64
	seed          int64
	faults        []string
	maxNumSeqs    int
	kvTokenBudget int
	tokenizerPath string
	quiet         bool
}

func newSimCmd(st *State) *cobra.Command {
	var o simOptions
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run a simulated OpenAI-compatible LLM server (serial or continuous-batching engine)",
		Long: `Run a simulated OpenAI-compatible LLM server on a loopback port.

It serves POST /v1/chat/completions (streaming and not), GET /v1/models,
GET /health and GET /metrics (Prometheus text, vLLM's metric names), and models
either a lock-serialized engine (serial) or an iteration-level continuous-
batching engine (batching) from a step-latency profile: prefill cost per
prompt token and decode step latency by batch size. Output text re-tokenizes
with the pinned tokenizer to exactly the tokens the engine emitted, and usage
agrees with it. Simulated time runs --time-scale times faster than the wall
clock.

It logs "listening on HOST:PORT" on stderr once it accepts connections (with
--port 0 the port is chosen by the system), then one line per request. SIGTERM
or SIGINT aborts the streams in flight and stops it with exit status 0.

Faults (--fault KIND:RATE, repeatable; RATE is a probability per request, drawn
from --seed): error_event, truncate, http500, http429, stall, malformed, crash
(the process exits with status 3 mid-stream).`,
		Example: `  rehearse sim --engine batching --port 8000
  rehearse sim --engine serial --port 0 --time-scale 10 --port-file /tmp/port
  rehearse sim --fault http500:0.05 --fault stall:0.01 --seed 7
  rehearse sim --list-profiles`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.listProfiles {
				return listSimProfiles(st.Stdout)
			}
			if o.profile != "" && !cmd.Flags().Changed("engine") {
				// The profile says which engine it was fitted for.
				if p, err := sim.ResolveProfile(o.profile); err == nil {
					o.engine = p.Engine
				}
			}
			opts, err := o.options()
			if err != nil {
				return err
			}
			return runSim(cmd.Context(), st, o, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.engine, "engine", sim.EngineBatching, "engine: serial (one lock) or batching (continuous batching); default: the --profile's engine, else batching")
	f.StringVar(&o.profile, "profile", "", "built-in profile name or profile JSON file (default t4-qwen2.5-1.5b-ENGINE)")
	f.BoolVar(&o.listProfiles, "list-profiles", false, "list the built-in profiles and exit")
	f.StringVar(&o.model, "model", "", "model id to serve (default: the profile's model)")
	f.StringVar(&o.host, "host", "127.0.0.1", "address to listen on")
	f.IntVar(&o.port, "port", 8000, "port to listen on; 0 picks a free one")
	f.StringVar(&o.portFile, "port-file", "", "write the chosen port to this file once listening")
	f.Float64Var(&o.timeScale, "time-scale", 1, "simulated time runs K times faster than wall time")
	f.Int64Var(&o.seed, "seed", 0, "seed for output lengths, output text and fault draws")
	f.StringArrayVar(&o.faults, "fault", nil, "inject a fault KIND:RATE (repeatable): error_event, truncate, http500, http429, stall, malformed, crash")
	f.IntVar(&o.maxNumSeqs, "max-num-seqs", 0, "cap on running sequences (default: the profile's; serial is always 1)")
	f.IntVar(&o.kvTokenBudget, "kv-token-budget", 0, "KV-cache budget in tokens (default: the profile's)")
	f.StringVar(&o.tokenizerPath, "tokenizer", "", "tokenizer.json to count tokens with (default: the pinned Qwen tokenizer)")
	f.BoolVar(&o.quiet, "quiet", false, "no per-request log lines")
	return cmd
}

func listSimProfiles(w io.Writer) error {
	for _, name := range sim.ProfileNames() {
		p, err := sim.BuiltinProfile(name)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%-28s %-8s %s\n", name, p.Engine, p.Description)
	}
	return nil
}

// options validates the flags and builds the simulator's options.
func (o simOptions) options() (sim.Options, error) {
	if o.engine != sim.EngineSerial && o.engine != sim.EngineBatching {
		return sim.Options{}, usageError("--engine %q: want serial or batching", o.engine)
	}
	if o.port < 0 || o.port > 65535 {
		return sim.Options{}, usageError("--port %d: want 0 to 65535", o.port)
	}
	if !(o.timeScale > 0) || o.timeScale > 1e6 {
		return sim.Options{}, usageError("--time-scale %g: want a number above 0 (and at most 1e6)", o.timeScale)
	}
	if o.maxNumSeqs < 0 || o.kvTokenBudget < 0 {
		return sim.Options{}, usageError("--max-num-seqs %d and --kv-token-budget %d must not be negative", o.maxNumSeqs, o.kvTokenBudget)
	}
	opts := sim.Options{
		Engine: o.engine, Model: o.model, TimeScale: o.timeScale, Seed: o.seed,
		MaxNumSeqs: o.maxNumSeqs, KVTokenBudget: o.kvTokenBudget,
	}
	name := o.profile
	if name == "" {
		name = "t4-qwen2.5-1.5b-" + o.engine
	}
	p, err := sim.ResolveProfile(name)
	if err != nil {
		return sim.Options{}, usageError("--profile: %v", err)
	}
	if p.Engine != o.engine {
		return sim.Options{}, usageError("--profile %s was fitted for the %s engine; pass --engine %s or another profile", name, p.Engine, p.Engine)
	}
	opts.Profile = p
	for _, s := range o.faults {
		f, err := sim.ParseFault(s)
		if err != nil {
			return sim.Options{}, usageError("--fault: %v", err)
		}
		opts.Faults = append(opts.Faults, f)
	}
	if o.tokenizerPath != "" {
		tk, err := tokenizer.Load(o.tokenizerPath)
		if err != nil {
			return sim.Options{}, usageError("--tokenizer: %v", err)
		}
		opts.Tokenizer = tk
	}
	return opts, nil
}

func runSim(ctx context.Context, st *State, o simOptions, opts sim.Options) error {
	logger := log.New(st.Stderr, "", log.LstdFlags|log.Lmicroseconds|log.LUTC)
	if !o.quiet {
		opts.Log = logger
	}
	opts.OnCrash = func() {
		logger.Print("rehearse sim: crash fault: exiting with status 3")
		crashExit(3)
	}
	srv, err := sim.New(opts)
	if err != nil {
		return usageError("%v", err)
	}
	defer srv.Close()

	addr := net.JoinHostPort(o.host, strconv.Itoa(o.port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("sim: listen on %s: %w", addr, err)
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(st.Stderr, "rehearse sim: http: ", log.LstdFlags|log.Lmicroseconds|log.LUTC),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	faults := "none"
	if len(opts.Faults) > 0 {
		var fs []string
		for _, f := range opts.Faults {
			fs = append(fs, f.String())
		}
		faults = strings.Join(fs, ",")
	}
	p := srv.Profile()
	logger.Printf("rehearse sim: engine %s, profile %s (%s), model %s, time scale %g, seed %d, faults %s",
		srv.Engine(), p.Name, p.Source, srv.Model(), opts.TimeScale, opts.Seed, faults)
	bound := ln.Addr().String()
	if o.portFile != "" {
		_, port, _ := net.SplitHostPort(bound)
		if err := os.WriteFile(o.portFile, []byte(port+"\n"), 0o644); err != nil {
			hs.Close()
			return fmt.Errorf("sim: --port-file: %w", err)
		}
	}
	logger.Printf("listening on %s", bound)

	select {
	case err := <-served:
		return fmt.Errorf("sim: serving on %s: %w", bound, err)
	case <-ctx.Done():
	}
	logger.Printf("rehearse sim: stopping (%v): aborting requests in flight", context.Cause(ctx))
	srv.Close()
	sctx, cancel := context.WithTimeout(context.Background(), simShutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("sim: serving on %s: %w", bound, err)
	}
	logger.Print("rehearse sim: stopped")
	return nil
}
