package drive

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/secret"
	"github.com/rehearse/rehearse/internal/stream"
)

// Target is the server a wave drives.
type Target struct {
	// Name is the server's label in the bundle.
	Name, BaseURL, Endpoint, Model string
	// APIKey is sent as a bearer token and never stored.
	APIKey       string
	IncludeUsage bool
	ExtraBody    map[string]any
	// Secrets are scrubbed from every record's text, reasoning, tool calls
	// and error after its tokens are counted (nil: none to scrub).
	Secrets *secret.Set
	// FollowRedirects follows a 3xx answer; without it the 3xx is the
	// request's outcome (http_status), so no other host is credited.
	FollowRedirects bool
	// Headers are sent with every request (vLLM's --header); their values
	// are secrets, scrubbed like the API key.
	Headers []stream.Header
	// Replicas, when it has two or more, are the base URLs of the
	// server's replicas, over which the client balances each request as
	// Balance says (BalanceRoundRobin by default), recording the replica;
	// BaseURL is then replica 0's.
	Replicas []string
	Balance  string
}

// Counter counts the tokens of a text (a *tokenizer.Tokenizer satisfies
// it). It must be safe for concurrent use.
type Counter interface {
	Count(text string) int
}

// Sink keeps every wave and record a Driver hands it, as they happen: the
// runner's journal (a *bundle.Journal is one). An error it returns stops
// the wave that met it, which returns it.
type Sink interface {
	WriteWave(w contract.Wave) error
	WriteRecord(r contract.Record) error
}

// EventKind says what a progress Event reports.
type EventKind int

// Progress events.
const (
	WaveReleased EventKind = iota
	RequestEnded
	WaveEnded
)

// Event is a progress report. Events are delivered one at a time, never
// concurrently.
type Event struct {
	Kind   EventKind
	Wave   contract.Wave
	Record *contract.Record // set for RequestEnded
	// Done and Failed count the wave's ended requests; Total is the number
	// of requests the wave will send, -1 when it is not known (a sustained
	// wave bounded by duration only).
	Done, Failed, Total int
	Elapsed             time.Duration
}

// Options configures a Driver.
type Options struct {
	// Sink receives every wave and record as it happens; nil keeps
	// nothing.
	Sink Sink
	// Counter re-tokenizes returned text into output_tokens; nil takes the
	// server's usage.completion_tokens instead.
	Counter Counter
	// Progress, when set, receives progress events.
	Progress func(Event)
	// Client sends the requests; nil makes a client with system TLS roots.
	Client *stream.Client
	// FirstWaveID is the id of the first wave (default 1); wave ids are
	// unique within the Driver.
	FirstWaveID int
}

// sender is what the driver needs of a client; tests replace it.
type sender interface {
	Warm(ctx context.Context, baseURL string, n int) error
	Send(ctx context.Context, p *stream.Prepared) stream.Result
	SendAt(ctx context.Context, p *stream.Prepared, release <-chan struct{}, armed func()) stream.Result
	Drop()
}

// Driver runs waves. Its methods may be called one after another from one
// goroutine; a Driver is not meant to run two waves at once.
type Driver struct {
	opts   Options
	client sender

	mu     sync.Mutex
	nextID int
	stats  Stats
	// rrNext numbers each balanced target's next request (round-robin).
	rrNext map[string]int
	// side is the side probes armed beside the wave about to be
	// released (nil: none); released starts them.
	side *sideRun

	progressMu sync.Mutex

	// stallPeriod is the stall watch's period (0: StallPeriod; negative:
	// no watch) and stallNow its clock (nil: time.Now); tests set them.
	stallPeriod time.Duration
	stallNow    func() time.Time
}

// New returns a driver.
func New(opts Options) *Driver {
	d := &Driver{opts: opts, nextID: opts.FirstWaveID}
	if d.nextID == 0 {
		d.nextID = 1
	}
	if opts.Client != nil {
		d.client = opts.Client
	} else {
		d.client = stream.NewClient(nil)
	}
	return d
}

// NextWaveID hands out the next wave id.
func (d *Driver) NextWaveID() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	id := d.nextID
	d.nextID++
	return id
}

// Stats sums what the load generator itself did over the waves a Driver
// ran, so a reader can judge whether the client shaped the figures.
type Stats struct {
	Waves int
	// ClientCPUS is the process's CPU time during the waves; WallS the sum
	// of the waves' wall times.
	ClientCPUS, WallS float64
	// MaxReleaseSpreadS is the largest release spread of a closed wave.
	MaxReleaseSpreadS float64
	// MaxStallS is the client's largest scheduling stall in a wave, and
	// Stalls the count of its stalls over contract.StallThresholdS.
	MaxStallS float64
	Stalls    int
}

// Stats returns the load generator's totals so far.
func (d *Driver) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

func (d *Driver) count(w contract.Wave) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.Waves++
	d.stats.ClientCPUS += w.ClientCPUS
	d.stats.WallS += w.WallS
	d.stats.MaxReleaseSpreadS = max(d.stats.MaxReleaseSpreadS, w.ReleaseSpreadS)
	if st := w.ClientStalls; st != nil {
		d.stats.MaxStallS = max(d.stats.MaxStallS, st.MaxS)
		d.stats.Stalls += st.Over
	}
}

// CountInputs counts each prompt of l with c, once, for plan.Load's
// InputTokens: its message contents (the server's template adds its own
// tokens).
func CountInputs(l plan.Load, c Counter) []int {
	out := make([]int, len(l.Prompts))
	for i, p := range l.Prompts {
		if i < len(l.Messages) && l.Messages[i] != nil {
			for _, m := range l.Messages[i] {
				out[i] += c.Count(m.Content)
			}
			continue
		}
		out[i] = c.Count(p)
	}
	return out
}

// WaveResult is a finished wave: its journaled state, the monotonic
// instant of its release (record times are seconds after it), and its
// records in client order.
type WaveResult struct {
	Wave    contract.Wave
	Release time.Time
	Records []contract.Record
	// Warmup is the warm-up wave of a sustained wave's first requests (nil
	// for other waves and for a sustained wave without warm-up requests).
	Warmup *WaveResult
	// UntilMet says a sustained wave's Until predicate ended it before its
	// bounds did.
	UntilMet bool
	// SideProbes is the wave of side probes sent beside this one (nil
	// when none were planned or the wave was never released).
	SideProbes *WaveResult
}

// prepare builds one request per prompt of l that a wave of the given
// number of requests sends: request i sends prepared[PromptIndex(i,
// len(prepared))], which is prompt i mod len(l.Prompts).
func prepare(t Target, l plan.Load, requests int) ([]*stream.Prepared, error) {
	// Request i sends prompt PromptIndex(i, len(out)): with fewer requests
	// than prompts, only the first ones are sent, and only they are built
	// (a dataset of 100,000 prompts is not marshalled for a wave of 64).
	out := make([]*stream.Prepared, min(len(l.Prompts), max(requests, 1)))
	for i := range out {
		prompt, model := l.Prompts[i], t.Model
		if m := l.ModelFor(i); m != "" {
			model = m
		}
		r := t.request(l, t.BaseURL, model)
		r.Prompt, r.Messages, r.MaxTokens, r.RequestID = prompt, l.MessagesFor(i), l.MaxTokensFor(i), l.RequestID(i)
		p, err := stream.Prepare(r)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// request is what t sends for load l to the address baseURL, asking for
// model: the endpoint, key, body style, headers and options every request
// of the load shares. The caller sets what is its own (the prompt or
// messages, max_tokens, the request id): a wave's requests, its side
// probes and its sessions' turns are all made here.
func (t Target) request(l plan.Load, baseURL, model string) stream.Request {
	return stream.Request{
		BaseURL: baseURL, Endpoint: t.Endpoint, Model: model, APIKey: t.APIKey,
		Temperature: l.Temperature, IncludeUsage: t.IncludeUsage, ExtraBody: t.ExtraBody, Timeout: l.Timeout,
		FollowRedirects: t.FollowRedirects, Style: l.Style, Headers: t.Headers,
	}
}

// release is a wave's release as its requests see it: the wave as it was
// journaled at release and the release instant, published once by closing
// done. A request may end before its wave is released (refused while
// connecting, canceled); its record waits for the release.
type release struct {
	done chan struct{}
	wave contract.Wave
	at   time.Time
	// load stamps each record with what its prompt asked for.
	load plan.Load
	// worker is the worker index records carry (nil: the whole plan).
	worker *int
	// secrets are scrubbed from each record (the target's).
	secrets *secret.Set
	// dropped is set when the wave was never released (its workers did
	// not agree): requests that waited on done record nothing.
	dropped bool
}

// stamp sets what r's prompt asked for and the worker that sent it.
func (r *release) stamp(rec *contract.Record) {
	r.load.Stamp(rec)
	if r.worker != nil {
		w := *r.worker
		rec.Worker = &w
	}
}

// scrub replaces the secrets in what the server sent back (text,
// reasoning, tool calls, error), its tokens counted already, and marks the
// record redacted where it found one. With no secrets it does nothing.
func (r *release) scrub(rec *contract.Record) {
	if r.secrets == nil {
		return
	}
	changed := false
	for _, s := range []*string{&rec.Text, &rec.ReasoningText, &rec.ToolCallText, &rec.Error} {
		if *s != "" {
			var c bool
			*s, c = r.secrets.Scrub(*s)
			changed = changed || c
		}
	}
	rec.Redacted = rec.Redacted || changed
}

func newRelease() *release { return &release{done: make(chan struct{})} }

// drop lets every request that waits on done go without a record: the
// wave was not released.
func (r *release) drop() {
	r.dropped = true
	close(r.done)
}

// publish sets the wave and its release instant and lets every request
// that waits on done go.
func (r *release) publish(w contract.Wave, at time.Time) {
	r.wave, r.at = w, at
	close(r.done)
}

// settle records request (or client) i of the wave once its release is
// published: the record goes into records[slot], the journal and the
// progress events.
func (d *Driver) settle(rel *release, records []contract.Record, slot, i, prompt int, intended time.Duration, res stream.Result, total int, tl *tally, replica int) {
	<-rel.done
	if rel.dropped {
		return
	}
	r := d.record(rel.wave, rel.at, i, prompt, intended, res)
	rel.scrub(&r)
	rel.stamp(&r)
	r.Replica = replicaTag(replica)
	records[slot] = r
	d.ended(rel.wave, rel.at, total, tl, r)
}

// record turns a result into a record of wave w, times relative to release.
// A request that ended before the release is recorded at the release, so
// no start_s or end_s of a wave is negative.
func (d *Driver) record(w contract.Wave, release time.Time, client, prompt int, intended time.Duration, res stream.Result) contract.Record {
	if res.Start.Before(release) {
		res.Start = release
	}
	if res.End.Before(res.Start) {
		res.End = res.Start
	}
	rel := func(t time.Time) float64 { return t.Sub(release).Seconds() }
	r := contract.Record{
		Kind: w.Kind, Server: w.Server, Concurrency: w.Concurrency, Repeat: w.Repeat, Wave: w.ID,
		Client: client, Prompt: prompt,
		IntendedStartS: intended.Seconds(),
		StartS:         rel(res.Start),
		EndS:           rel(res.End),
		ChunkTimesS:    make([]float64, len(res.ChunkTimes)),
		OK:             res.OK, ErrorKind: res.ErrorKind, Error: res.Error, HTTPStatus: res.HTTPStatus,
		RetryAfterS:           res.RetryAfterS,
		Text:                  res.Text,
		UsageCompletionTokens: res.UsageCompletionTokens,
		UsagePromptTokens:     res.UsagePromptTokens,
		FinishReason:          res.FinishReason,
		Retried:               res.Retried,
	}
	if !res.FirstContent.IsZero() {
		v := rel(res.FirstContent)
		r.FirstContentS = &v
	}
	if !res.FirstToken.IsZero() {
		v := rel(res.FirstToken)
		r.FirstTokenS = &v
	}
	for i, ct := range res.ChunkTimes {
		r.ChunkTimesS[i] = rel(ct)
	}
	r.ReasoningText, r.ToolCallText = res.Reasoning, res.ToolCallText
	r.ClientAddedS = contract.SummarizeAdded(res.AddedNS)
	if d.opts.Counter != nil && res.Reasoning != "" {
		n := d.opts.Counter.Count(res.Reasoning)
		r.ReasoningTokens = &n
	}
	switch {
	case d.opts.Counter != nil:
		r.OutputTokens = d.opts.Counter.Count(res.Text)
	case res.UsageCompletionTokens != nil:
		r.OutputTokens = *res.UsageCompletionTokens
	}
	return r
}

func (d *Driver) journalWave(w contract.Wave) error {
	if d.opts.Sink == nil {
		return nil
	}
	return d.opts.Sink.WriteWave(w)
}

func (d *Driver) journalRecord(r contract.Record) error {
	if d.opts.Sink == nil {
		return nil
	}
	return d.opts.Sink.WriteRecord(r)
}

func (d *Driver) progress(ev Event) {
	if d.opts.Progress == nil {
		return
	}
	d.progressMu.Lock()
	defer d.progressMu.Unlock()
	d.opts.Progress(ev)
}

// tally counts a wave's ended requests for progress events and keeps the
// first journal error.
type tally struct {
	mu           sync.Mutex
	done, failed int
	journalErr   error
}

func (d *Driver) ended(w contract.Wave, release time.Time, total int, tl *tally, r contract.Record) {
	err := d.journalRecord(r)
	tl.mu.Lock()
	tl.done++
	if !r.OK {
		tl.failed++
	}
	if err != nil && tl.journalErr == nil {
		tl.journalErr = err
	}
	done, failed := tl.done, tl.failed
	tl.mu.Unlock()
	d.progress(Event{Kind: RequestEnded, Wave: w, Record: &r, Done: done, Failed: failed, Total: total, Elapsed: time.Since(release)})
}

// stopped returns the wave's stop reason for a canceled context.
func stopped(ctx context.Context) string {
	if ctx.Err() == nil {
		return ""
	}
	return "canceled: " + context.Cause(ctx).Error()
}

func waveError(ctx context.Context, w contract.Wave, journalErr error) error {
	if journalErr != nil {
		return fmt.Errorf("wave %d: journal: %w", w.ID, journalErr)
	}
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		if errors.Is(cause, ctx.Err()) {
			return fmt.Errorf("wave %d (%s, %s, repeat %d) stopped: %w", w.ID, w.Server, w.Kind, w.Repeat, cause)
		}
		return fmt.Errorf("wave %d (%s, %s, repeat %d) stopped: %w: %w", w.ID, w.Server, w.Kind, w.Repeat, ctx.Err(), cause)
	}
	return nil
}

func anchor(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
