package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// ShutdownGrace bounds how long Command.Serve waits for connections to
// close once its context ends; streams in flight are aborted first.
const ShutdownGrace = 5 * time.Second

// Command is what rehearse sim was asked to do, as its flags give it: the
// server's settings, which Serve checks and turns into Options, and where
// it listens.
type Command struct {
	// Engine is serial or batching; without EngineSet (no --engine) a
	// Profile's own engine is taken.
	Engine    string
	EngineSet bool
	// Profile is a built-in profile's name or a profile file ("": the
	// T4 profile of Engine).
	Profile string
	// Model is the model id served ("": the profile's).
	Model string
	// LoRAModules are adapters served beside Model, as vLLM's
	// --lora-modules NAME=PATH (the path is not read: NAME is served).
	LoRAModules []string
	// Host and Port are where it listens (port 0: one the system picks);
	// PortFile, when set, receives the port once it listens.
	Host     string
	Port     int
	PortFile string
	// TimeScale, Seed, MaxNumSeqs, KVTokenBudget, PrefixCaching,
	// IdleTimeout, ToolCalls and StampSends are the Options of the same
	// names (0 and "": the profile's); Reasoning is ReasoningTokens.
	TimeScale      float64
	Seed           int64
	MaxNumSeqs     int
	KVTokenBudget  int
	PrefixCaching  string
	IdleTimeout    time.Duration
	Reasoning      int
	ReasoningField string
	ToolCalls      bool
	StampSends     bool
	// Faults are KIND:RATE (ParseFault).
	Faults []string
	// Tokenizer is a tokenizer.json, or a folder holding one ("": the
	// pinned tokenizer).
	Tokenizer string
	// Quiet logs no line per request.
	Quiet bool
}

// UsageError is a setting Serve refuses before it listens: the command
// exits 2 with it.
type UsageError struct{ Err error }

// Error is the refusal's one line.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap is the refusal's cause.
func (e *UsageError) Unwrap() error { return e.Err }

func refused(format string, a ...any) error { return &UsageError{fmt.Errorf(format, a...)} }

// ListProfiles writes the built-in profiles, one a line: name, engine,
// description.
func ListProfiles(w io.Writer) error {
	for _, name := range engine.ProfileNames() {
		p, err := engine.BuiltinProfile(name)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%-28s %-8s %s\n", name, p.Engine, p.Description)
	}
	return nil
}

// check refuses settings out of range, naming their flags.
// loraNames are the adapter names of --lora-modules, each NAME or
// NAME=PATH as vLLM takes them: none empty, none twice.
func loraNames(modules []string) ([]string, error) {
	var names []string
	for _, m := range modules {
		name, _, _ := strings.Cut(m, "=")
		switch {
		case strings.TrimSpace(name) == "" || name != strings.TrimSpace(name):
			return nil, refused("--lora-modules %q: want NAME or NAME=PATH, the name neither empty nor padded", m)
		case slices.Contains(names, name):
			return nil, refused("--lora-modules %q: %s is given twice", m, name)
		}
		names = append(names, name)
	}
	return names, nil
}

func (c Command) check() error {
	switch {
	case c.Engine != engine.Serial && c.Engine != engine.Batching:
		return refused("--engine %q: want serial or batching", c.Engine)
	case c.Port < 0 || c.Port > 65535:
		return refused("--port %d: want 0 to 65535", c.Port)
	case !(c.TimeScale > 0) || c.TimeScale > 1e6:
		return refused("--time-scale %g: want a number above 0 (and at most 1e6)", c.TimeScale)
	case c.MaxNumSeqs < 0 || c.KVTokenBudget < 0:
		return refused("--max-num-seqs %d and --kv-token-budget %d must not be negative", c.MaxNumSeqs, c.KVTokenBudget)
	case c.PrefixCaching != "" && c.PrefixCaching != PrefixCachingOn && c.PrefixCaching != PrefixCachingOff:
		return refused("--prefix-caching %q: want on or off", c.PrefixCaching)
	case c.IdleTimeout < 0:
		return refused("--idle-timeout %v: want 0 (none) or a positive duration such as 5s", c.IdleTimeout)
	case c.Reasoning < 0:
		return refused("--reasoning-tokens %d: want 0 (none) or more", c.Reasoning)
	case c.ReasoningField != ReasoningFieldReasoning && c.ReasoningField != ReasoningFieldContent:
		return refused("--reasoning-field %q: want %s or %s", c.ReasoningField, ReasoningFieldReasoning, ReasoningFieldContent)
	}
	return nil
}

// options checks the settings and builds the server's Options: the
// profile (of the engine, or the engine of the profile), the faults and
// the tokenizer, through the one resolver.
func (c Command) options(ctx context.Context) (Options, error) {
	if c.Profile != "" && !c.EngineSet {
		// The profile says which engine it was fitted for.
		if p, err := engine.ResolveProfile(c.Profile); err == nil {
			c.Engine = p.Engine
		}
	}
	if err := c.check(); err != nil {
		return Options{}, err
	}
	loras, err := loraNames(c.LoRAModules)
	if err != nil {
		return Options{}, err
	}
	opts := Options{
		LoRAModules:     loras,
		ReasoningTokens: c.Reasoning, ReasoningField: c.ReasoningField, ToolCalls: c.ToolCalls,
		StampSends: c.StampSends,
		Engine:     c.Engine, Model: c.Model, TimeScale: c.TimeScale, Seed: c.Seed,
		MaxNumSeqs: c.MaxNumSeqs, KVTokenBudget: c.KVTokenBudget, IdleTimeout: c.IdleTimeout,
		PrefixCaching: c.PrefixCaching,
	}
	name := c.Profile
	if name == "" {
		name = "t4-qwen2.5-1.5b-" + c.Engine
	}
	p, err := engine.ResolveProfile(name)
	if err != nil {
		return Options{}, refused("--profile: %v", err)
	}
	if p.Engine != c.Engine {
		return Options{}, refused("--profile %s was fitted for the %s engine; pass --engine %s or another profile", name, p.Engine, p.Engine)
	}
	opts.Profile = p
	for _, s := range c.Faults {
		f, err := ParseFault(s)
		if err != nil {
			return Options{}, refused("--fault: %v", err)
		}
		opts.Faults = append(opts.Faults, f)
	}
	if c.Tokenizer != "" {
		tk, _, err := tokenizer.Resolve(ctx, tokenizer.Request{Path: c.Tokenizer})
		if err != nil {
			return Options{}, refused("--tokenizer: %v", err)
		}
		opts.Tokenizer = tk
	}
	return opts, nil
}

// Serve runs the simulated server until ctx ends: it checks the settings,
// listens, logs on stderr a line saying what it serves and then
// "listening on HOST:PORT", writes PortFile, serves, and once ctx ends
// aborts the streams in flight and shuts down. The crash fault logs and
// calls exit(3). A refused setting is a *UsageError.
func (c Command) Serve(ctx context.Context, stderr io.Writer, exit func(code int)) error {
	opts, err := c.options(ctx)
	if err != nil {
		return err
	}
	logger := log.New(stderr, "", log.LstdFlags|log.Lmicroseconds|log.LUTC)
	if !c.Quiet {
		opts.Log = logger
	}
	opts.OnCrash = func() {
		logger.Print("rehearse sim: crash fault: exiting with status 3")
		exit(3)
	}
	srv, err := New(opts)
	if err != nil {
		return &UsageError{err}
	}
	defer srv.Close()

	addr := net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("sim: listen on %s: %w", addr, err)
	}
	hs := srv.HTTPServer(log.New(stderr, "rehearse sim: http: ", log.LstdFlags|log.Lmicroseconds|log.LUTC))
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	logger.Print(srv.started(opts))
	bound := ln.Addr().String()
	if c.PortFile != "" {
		_, port, _ := net.SplitHostPort(bound)
		if err := os.WriteFile(c.PortFile, []byte(port+"\n"), 0o644); err != nil {
			hs.Close()
			return fmt.Errorf("sim: --port-file: %w", err)
		}
	}
	logger.Printf("listening on %s", bound)
	return srv.stop(ctx, hs, served, bound, logger)
}

// started is the line that says what the server serves: engine, profile,
// model, time scale, seed, prefix caching, faults, reasoning.
func (s *Server) started(opts Options) string {
	faults := "none"
	if len(opts.Faults) > 0 {
		var fs []string
		for _, f := range opts.Faults {
			fs = append(fs, f.String())
		}
		faults = strings.Join(fs, ",")
	}
	p := s.Profile()
	caching := PrefixCachingOff
	if s.PrefixCaching() {
		caching = PrefixCachingOn
	}
	reasoning := ""
	if opts.ReasoningTokens > 0 {
		reasoning = fmt.Sprintf(", reasoning %d tokens as delta.%s", opts.ReasoningTokens, opts.ReasoningField)
	}
	if opts.ToolCalls {
		reasoning += ", content as tool calls"
	}
	return fmt.Sprintf("rehearse sim: engine %s, profile %s (%s), model %s, time scale %g, seed %d, prefix caching %s, faults %s%s",
		s.Engine(), p.Name, p.Source, s.Model(), opts.TimeScale, opts.Seed, caching, faults, reasoning)
}

// stop waits until serving fails or ctx ends; then it aborts the requests
// in flight and shuts the HTTP server down within ShutdownGrace.
func (s *Server) stop(ctx context.Context, hs *http.Server, served chan error, bound string, logger *log.Logger) error {
	select {
	case err := <-served:
		return fmt.Errorf("sim: serving on %s: %w", bound, err)
	case <-ctx.Done():
	}
	logger.Printf("rehearse sim: stopping (%v): aborting requests in flight", context.Cause(ctx))
	s.Close()
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
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
