package rehearsal

import (
	"context"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/drive"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/stream"
)

// Target is the server a wave drives.
type Target = drive.Target

// WaveResult is a finished wave.
type WaveResult = drive.WaveResult

// WaveDriver runs one planned wave and journals it; package drive is the
// real one.
type WaveDriver interface {
	Wave(ctx context.Context, t Target, w plan.Wave) (WaveResult, error)
	// OutputTokensSource is "tokenizer" or "usage".
	OutputTokensSource() string
}

// driveDriver runs waves with package drive, each request sending the
// plan's load; the journal keeps what they record.
type driveDriver struct {
	d    *drive.Driver
	load plan.Load
	// source is provenance.output_tokens_source.
	source string
}

// newDriveDriver drives the load with each record kept by the journal j;
// with a counter, the load's prompts are counted once (input_tokens) and
// returned text re-tokenized, without one the servers' usage counts.
func newDriveDriver(j *bundle.Journal, counter Counter, load plan.Load, events func(WaveEvent), client *stream.Client) *driveDriver {
	var c drive.Counter
	source := bundle.SourceUsage
	if counter != nil {
		c, source = counter, bundle.SourceTokenizer
		load.InputTokens = drive.CountInputs(load, counter)
	}
	return &driveDriver{
		d:      drive.New(drive.Options{Sink: j, Counter: c, Progress: events, Client: client}),
		load:   load,
		source: source,
	}
}

func (dd *driveDriver) OutputTokensSource() string { return dd.source }

// Stats is what the load generator did over the waves so far.
func (dd *driveDriver) Stats() drive.Stats { return dd.d.Stats() }

func (dd *driveDriver) Wave(ctx context.Context, t Target, w plan.Wave) (WaveResult, error) {
	return dd.d.Wave(ctx, t, dd.load, w)
}

// DescriptorError is a plan refused before any work for needing more open
// files than the process may hold.
type DescriptorError = drive.DescriptorError
