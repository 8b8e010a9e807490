package drive

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/stream"
)

// Bench is a rehearsal of one endpoint that is already running.
type Bench struct {
	// Dir is the bundle directory; it is created, and must not already
	// hold a bundle.
	Dir      string
	Target   Target
	Workload bundle.Workload
	// Provenance as the caller knows it (tool, host, GPUs, model,
	// tokenizer, command); RunBench sets the start and finish times and
	// the output-token source.
	Provenance bundle.Provenance
	Notes      []string
	Counter    Counter
	Progress   func(Event)
	Client     *stream.Client
}

// RunBench writes the bundle's header to the journal, drives the series,
// then rebuilds the results from the journal and writes results.json. The
// results come back whenever the journal could be read, also when the
// series stopped early; the error then says why it stopped.
func RunBench(ctx context.Context, b Bench) (*bundle.Results, error) {
	if err := prepareDir(b.Dir); err != nil {
		return nil, err
	}
	j, err := bundle.CreateJournal(filepath.Join(b.Dir, bundle.JournalFile))
	if err != nil {
		return nil, err
	}
	d := New(Options{Journal: j, Counter: b.Counter, Progress: b.Progress, Client: b.Client})
	h := &bundle.Results{
		Provenance: b.Provenance,
		Workload:   b.Workload,
		Servers: []bundle.Server{{
			Name: b.Target.Name, BaseURL: config.RedactURL(b.Target.BaseURL), Model: b.Target.Model, LaunchArgv: []string{},
		}},
		Notes: append([]string(nil), b.Notes...),
	}
	h.Provenance.StartedAt = time.Now().UTC().Format(time.RFC3339Nano)
	h.Provenance.OutputTokensSource = d.OutputTokensSource()
	if d.OutputTokensSource() == SourceUsage {
		h.Notes = append(h.Notes, "output_tokens are the server's own usage.completion_tokens, not re-tokenized text")
	}
	if err := j.WriteHeader(h); err != nil {
		j.Close()
		return nil, err
	}
	var runErr error
	for _, w := range plan.Server(b.Workload, b.Target.Name) {
		if _, runErr = d.Wave(ctx, b.Target, LoadOf(b.Workload), w); runErr != nil {
			break
		}
	}
	if runErr != nil && ctx.Err() != nil {
		h.Notes = append(h.Notes, fmt.Sprintf("the rehearsal was stopped before it finished (%v); the bundle holds what finished", context.Cause(ctx)))
	}
	if st := d.Stats(); st.Waves > 0 && st.WallS > 0 {
		h.Notes = append(h.Notes, fmt.Sprintf("load generator: %.2f s of CPU over %.2f s of waves (%.0f%% of one core); largest closed-wave release spread %.3f ms",
			st.ClientCPUS, st.WallS, 100*st.ClientCPUS/st.WallS, st.MaxReleaseSpreadS*1000))
	}
	h.Provenance.FinishedAt = time.Now().UTC().Format(time.RFC3339Nano)
	herr := j.WriteHeader(h)
	cerr := j.Close()
	res, rerr := bundle.ReadJournal(j.Path())
	if rerr != nil {
		return nil, errors.Join(runErr, herr, cerr, rerr)
	}
	if err := bundle.WriteResults(b.Dir, res); err != nil {
		return res, errors.Join(runErr, err)
	}
	return res, errors.Join(runErr, herr, cerr)
}

// prepareDir creates dir, refusing one that already holds a bundle.
func prepareDir(dir string) error {
	if dir == "" {
		return errors.New("no output directory")
	}
	for _, f := range []string{bundle.ResultsFile, bundle.JournalFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return fmt.Errorf("%s already holds a bundle (%s): choose another output directory", dir, f)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	return nil
}
