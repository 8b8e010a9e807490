package rehearsal

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/drive"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/promscrape"
	"github.com/rehearse/rehearse/internal/search"
	"github.com/rehearse/rehearse/internal/secret"
	"github.com/rehearse/rehearse/internal/supervise"
	"github.com/rehearse/rehearse/internal/workload"
)

// Options is one rehearsal to run.
type Options struct {
	Rehearsal *config.Rehearsal
	// Dir is the bundle folder; it is created and must not hold files.
	Dir string
	// RehearseExe replaces {rehearse} in launch argv and keeps every
	// launched server (see supervise.KeeperMain); "" is this program.
	RehearseExe string
	// Prompts are the workload's prompts, already resolved (Prompts).
	Prompts workload.Set
	// Counter re-tokenizes returned text; nil counts the servers' usage.
	Counter Counter
	// Provenance is the header's provenance as far as the caller knows it
	// (tool, command, host, GPUs, tokenizer, simulation); model, times and
	// output-token source are filled in here.
	Provenance bundle.Provenance
	// Notes are added to the bundle's notes.
	Notes []string
	// Progress receives one line per step (launch, ready, wave, stop); nil
	// for none.
	Progress func(Event)
	// WaveEvents receives every wave's release, each request's end and the
	// wave's end, one at a time (bench draws its progress bar from them);
	// nil for none.
	WaveEvents func(WaveEvent)
	// Driver runs the waves; nil uses package drive.
	Driver WaveDriver
	// Sync releases each wave of a split plan (Rehearsal.Segment) at the
	// instant its workers agree on; nil releases a split plan of one wave
	// as soon as it is ready and refuses one of more (a SegmentError).
	Sync Synchronizer
}

// Counter counts the tokens of returned text.
type Counter interface{ Count(text string) int }

// Event is a progress report.
type Event struct {
	Server string
	// Step is launch, ready, wave, mechanism_check, probe, stop, fail,
	// warn (shown even when quiet) or note.
	Step string
	Text string
	Wave *contract.Wave
	// Capacity is the search's standing after the probe (Step probe).
	Capacity *search.Capacity
	// PID is the launched process's id (Step launch, once it runs).
	PID int
}

// Outcome is what Run did.
type Outcome struct {
	Dir     string
	Results *bundle.Results
	// Interrupted is true when ctx was canceled (Ctrl-C) before the end.
	Interrupted bool
	// Failed lists servers that were not ready, died, or could not launch,
	// each with why.
	Failed []string
	// Stopped is why the first wave cut by the interruption stopped (or
	// was not released); nil when none was.
	Stopped error
	// Unsynced is why a split plan's workers could not release a wave
	// together (a worker died, the coordinator is gone); the waves from it
	// on were not run. nil when every wave was released.
	Unsynced error
	// Refused is why the rehearsal stopped before sending a server any
	// request because its input was wrong: a model the server does not
	// serve (a *stream.ModelNotServedError); the servers after it were not
	// rehearsed. nil when none was refused.
	Refused error
}

// WaveEvent is a progress report from within a wave.
type WaveEvent = drive.Event

// Kinds of WaveEvent.
const (
	WaveReleased = drive.WaveReleased
	RequestEnded = drive.RequestEnded
	WaveEnded    = drive.WaveEnded
)

// Run runs the rehearsal and writes its bundle (results.json, the journal,
// the server logs; Rehearse renders the report). It returns an error
// when no bundle could be written, or when writing the journal or
// results.json failed (a *bundle.WriteError, wrapped): the first write
// error of the journal stops the run at once, as Ctrl-C does (the requests
// in flight end, the servers stop), and what the journal holds before it
// is the bundle. Server failures and interruption are in the Outcome and
// the bundle's notes.
func Run(ctx context.Context, o Options) (*Outcome, error) {
	cfg := o.Rehearsal
	if cfg == nil {
		return nil, errors.New("rehearsal: no rehearsal given")
	}
	// The plan is computed once: the runner walks it, drive sends its
	// load, and results.json records it.
	planned := plan.WorkloadOf(cfg, o.Prompts)
	recorded := recordedWorkload(cfg, planned)
	predicted, err := preflight(ctx, o, planned, recorded)
	if err != nil {
		return nil, err
	}
	if err := prepareDir(o.Dir); err != nil {
		return nil, err
	}
	journal, err := bundle.CreateJournal(filepath.Join(o.Dir, bundle.JournalFile))
	if err != nil {
		return nil, err
	}
	// The journal's first write error ends the run: nothing after it
	// could be kept.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	journal.OnFail(cancel)
	driver := o.Driver
	if driver == nil {
		driver = newDriveDriver(journal, o.Counter, planned.Load, o.WaveEvents, wavesClient(cfg))
	}
	r := &runner{o: o, cfg: cfg, planned: planned, journal: journal, driver: driver, out: &Outcome{Dir: o.Dir}, predicted: predicted, secrets: rehearsalSecrets(cfg)}
	r.res = header(o, driver, recorded, time.Now())
	if seg := cfg.Segment; !seg.Whole() {
		w := bundle.Worker{}
		if o.Provenance.Worker != nil {
			w = *o.Provenance.Worker
		}
		w.Index, w.Count, w.PlanDigest = seg.Index, seg.Count, digest(cfg, r.res.Workload)
		r.res.Provenance.Worker = &w
	}
	for _, s := range cfg.Servers {
		if p, ok := predicted[s.Name]; ok {
			r.res.Notes = append(r.res.Notes, p.Note)
		}
	}
	r.writeHeader()

	for i := range cfg.Servers {
		if ctx.Err() != nil || r.out.Unsynced != nil {
			break
		}
		ok := r.server(ctx, i)
		if r.out.Refused != nil {
			break // refuse noted the servers not rehearsed
		}
		if !ok && cfg.OnServerFailure == config.OnFailureStop && ctx.Err() == nil {
			for _, s := range cfg.Servers[i+1:] {
				r.note("server %s was not rehearsed: on_server_failure is stop and %s failed", s.Name, cfg.Servers[i].Name)
			}
			break
		}
	}
	if st, ok := driver.(interface{ Stats() drive.Stats }); ok {
		if st := st.Stats(); st.Waves > 0 && st.WallS > 0 {
			r.note("load generator: %.2f s of CPU over %.2f s of waves (%.0f%% of one core); largest closed-wave release spread %.3f ms; largest client stall %.1f ms (%d over 20 ms)",
				st.ClientCPUS, st.WallS, 100*st.ClientCPUS/st.WallS, st.MaxReleaseSpreadS*1000, st.MaxStallS*1000, st.Stalls)
		}
	}
	return r.finish(ctx)
}

// preflight refuses, before the bundle's folder is made and any request
// is sent, a rehearsal that cannot run as planned: more connections than
// the open-file limit allows, a split plan its workers cannot release
// together, a capacity profile that cannot predict (a *PredictError), a
// model a server already running does not serve (a launched one is asked
// at readiness). It returns the predicted capacity brackets.
func preflight(ctx context.Context, o Options, planned plan.Workload, recorded bundle.Workload) (map[string]Predicted, error) {
	if err := drive.CheckDescriptors(drive.ConnectionsNeeded(planned)); err != nil {
		return nil, err
	}
	if err := checkSegment(o, planned); err != nil {
		return nil, err
	}
	predicted, err := PredictCapacities(o.Rehearsal, recorded)
	if err != nil {
		return nil, err
	}
	if err := checkServedModels(ctx, o.Rehearsal); err != nil {
		return nil, err
	}
	return predicted, nil
}

// finish ends the journal and writes results.json from it; a write error
// of either stops it there (see stoppedByWrite).
func (r *runner) finish(ctx context.Context) (*Outcome, error) {
	if err := r.journal.Err(); err != nil {
		r.journal.Close()
		return r.out, stoppedByWrite(err, r.o.Dir)
	}
	if ctx.Err() != nil {
		r.out.Interrupted = true
		r.note("the rehearsal was interrupted (%v) at %s; the bundle holds what finished before", context.Cause(ctx), time.Now().UTC().Format(time.RFC3339))
	}
	r.res.Provenance.FinishedAt = time.Now().UTC().Format(time.RFC3339Nano)
	r.writeHeader()
	if err := r.journal.Close(); err != nil {
		return r.out, stoppedByWrite(err, r.o.Dir)
	}
	res, err := bundle.ReadJournal(r.journal.Path())
	if err != nil {
		return r.out, err
	}
	if err := bundle.WriteResults(r.o.Dir, res); err != nil {
		return r.out, stoppedByWrite(err, r.o.Dir)
	}
	r.out.Results = res
	return r.out, nil
}

// stoppedByWrite is the rehearsal's error for err, the first write error
// of the bundle: one line naming the file and the error, and where what was
// journaled before it is. Another error is returned as it is.
func stoppedByWrite(err error, dir string) error {
	var we *bundle.WriteError
	if !errors.As(err, &we) {
		return err
	}
	return fmt.Errorf("%w; the rehearsal stopped at this first write error, and %s keeps what was journaled before it (once there is room, \"rehearse report %s\" rebuilds the bundle from it)", we, dir, dir)
}

// prepareDir creates the bundle folder by the one rule of a bundle's
// folder (bundle.MakeEmptyDir): a bundle is never written over another,
// nor mixed with other files.
func prepareDir(dir string) error {
	if dir == "" {
		return errors.New("rehearsal: no output folder")
	}
	return bundle.MakeEmptyDir(dir)
}

type runner struct {
	o   Options
	cfg *config.Rehearsal
	// planned is the workload the runner walks: each server's waves
	// (plan.Server) and what each request sends.
	planned plan.Workload
	journal *bundle.Journal
	driver  WaveDriver
	out     *Outcome
	// predicted are the capacity brackets predicted per server.
	predicted map[string]Predicted

	// secrets are scrubbed from records, notes, failures and progress.
	secrets *secret.Set

	mu  sync.Mutex
	res *bundle.Results
}

// shown is text as the bundle and the terminal may show it: no URL's
// password, no secret.
func (r *runner) shown(text string) string {
	return r.secrets.Text(config.RedactURL(text))
}

// progress reports a step; like notes and failures, its text may name a
// server's URL, whose password it never shows.
func (r *runner) progress(server, step, format string, a ...any) {
	if r.o.Progress != nil {
		r.o.Progress(Event{Server: server, Step: step, Text: r.shown(fmt.Sprintf(format, a...))})
	}
}

// note adds a line to the bundle's notes and journals the header again.
func (r *runner) note(format string, a ...any) {
	r.mu.Lock()
	r.res.Notes = append(r.res.Notes, r.shown(fmt.Sprintf(format, a...)))
	r.mu.Unlock()
	r.writeHeader()
}

func (r *runner) writeHeader() {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A failed journal write stops the run (Journal.OnFail) and is
	// returned by Run.
	_ = r.journal.WriteHeader(r.res)
}

func (r *runner) setServer(i int, f func(*bundle.Server)) {
	r.mu.Lock()
	f(&r.res.Servers[i])
	r.mu.Unlock()
	r.writeHeader()
}

func (r *runner) fail(i int, why string) {
	name := r.cfg.Servers[i].Name
	// Errors from supervise already begin with the server's name.
	why = r.shown(strings.TrimPrefix(why, name+": "))
	r.out.Failed = append(r.out.Failed, name+": "+why)
	r.progress(name, "fail", "%s", why)
}

// server rehearses server i; false when it failed.
func (r *runner) server(ctx context.Context, i int) bool {
	s := r.cfg.Servers[i]
	apiKey := ""
	if s.APIKeyEnv != "" {
		var err error
		if apiKey, err = config.APIKey(s.APIKeyEnv); err != nil {
			why := fmt.Sprintf("servers[%d].api_key_env: $%s: %v", i, s.APIKeyEnv, err)
			r.note("server %s was not rehearsed: %s", s.Name, why)
			r.fail(i, why)
			return false
		}
	}
	fl, ok := r.launch(ctx, i, apiKey)
	if !ok {
		return false
	}
	r.progress(s.Name, "launch", "waiting for %s to be ready (up to %s)", r.readyWhat(fl), s.Ready.Timeout)
	readyStart := time.Now()
	logName, err := r.ready(ctx, i, fl, apiKey)
	if err != nil {
		r.stop(i, fl)
		if ctx.Err() != nil {
			return true
		}
		if r.refuse(i, err) {
			return false
		}
		// The note names the bundle's copy of the log, not the path on
		// the machine that ran the rehearsal.
		reason, _, _ := strings.Cut(err.Error(), "\n")
		var nr *supervise.NotReadyError
		if errors.As(err, &nr) {
			reason = nr.Reason
			if logName != "" {
				reason += "; see " + logName
			}
		}
		r.note("server %s was not ready: %s", s.Name, reason)
		r.fail(i, err.Error())
		return false
	}
	r.progress(s.Name, "ready", "ready after %.1f s", time.Since(readyStart).Seconds())
	baseURL := fl.baseURL
	// A server reached with readiness "answer" is asked nothing more than
	// the waves send it.
	if s.Ready.Mode != config.ReadyAnswer {
		r.askServer(ctx, s, fl.urls[0], apiKey)
	}

	// The body's extra fields are the plan's, which results.json records:
	// extra_body and what the prompt source adds (ignore_eos), so body and
	// bundle agree.
	target := Target{Name: s.Name, BaseURL: baseURL, Endpoint: r.planned.Endpoint, Model: s.Model, APIKey: apiKey,
		IncludeUsage: r.planned.IncludeUsage, ExtraBody: r.planned.ExtraBody, FollowRedirects: s.FollowRedirects,
		Secrets: r.secrets, Headers: streamHeaders(s.Headers)}
	if s.Balanced() {
		target.Replicas, target.Balance = fl.urls, s.Balance
	}
	healthy := r.waves(ctx, i, target, fl, apiKey)
	// On an interrupt the waves returned once their requests in flight had
	// ended as canceled and were journaled; only now does the server hear
	// of it (supervise.Start never ties it to ctx), so no request is cut
	// by the server's own shutdown.
	r.stop(i, fl)
	return healthy
}

// askServer asks a ready server, before the load, what software it runs
// and, where it offers /tokenize, whether it counts the first prompt as the
// rehearsal's tokenizer does (a mismatch is a note and a warning).
func (r *runner) askServer(ctx context.Context, s config.Server, url, apiKey string) {
	name, model, client := s.Name, s.Model, orDefault(httpClient(s.InsecureTLS, 0))
	if rt := serverRuntimes(ctx, client, name, url, apiKey); len(rt) > 0 {
		r.mu.Lock()
		r.res.Provenance.Runtimes = append(r.res.Provenance.Runtimes, rt...)
		r.mu.Unlock()
		r.writeHeader()
	}
	if len(r.o.Prompts.Prompts) == 0 {
		return
	}
	if w := tokenizeCheck(ctx, client, url, apiKey, model, r.o.Prompts.Prompts[0].Text, r.o.Counter); w != "" {
		r.note("server %s: %s", name, w)
		r.progress(name, "warn", "%s", w)
	}
}

// readyWhat names what readiness waits for: the one address, or the
// replicas.
func (r *runner) readyWhat(f *fleet) string {
	if f.replicated {
		return fmt.Sprintf("%d replicas (%s)", len(f.urls), strings.Join(f.urls, ", "))
	}
	return f.urls[0]
}

// died reports (once) a launched server one of whose processes exited
// before it was stopped (a replica's death ends the server: its waves no
// longer measure what the file named). When the wave's requests failed as
// a dying server's do, it gives the exit a moment to be observed.
func (r *runner) died(i int, fl *fleet, during string, records []contract.Record) bool {
	if !fl.launched() {
		return false
	}
	for _, rec := range records {
		if rec.ErrorKind == contract.ErrConnect || rec.ErrorKind == contract.ErrStreamTruncated {
			// The kernel closes a dying process's sockets before its exit
			// can be observed: watch it for a moment.
		watch:
			for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				for k := range fl.group.Len() {
					if p := fl.group.Proc(k); !p.Alive() {
						select {
						case <-p.Done():
						case <-time.After(2 * time.Second):
						}
						break watch
					}
				}
			}
			break
		}
	}
	k, e, exited := fl.group.Died()
	if !exited {
		return false
	}
	s := r.cfg.Servers[i]
	what := e.Ended() + " " + during
	r.setExit(i, fl, k, what, true)
	if l := fl.label(k); l != "" {
		r.note("server %s died: its %s %s; the other processes were stopped with it and its remaining waves were not run (on_server_failure: %s)", s.Name, l, what, r.cfg.OnServerFailure)
		r.fail(i, "died: "+l+" "+what)
		return true
	}
	r.note("server %s died: %s; its remaining waves were not run (on_server_failure: %s)", s.Name, what, r.cfg.OnServerFailure)
	r.fail(i, "died: "+what)
	return true
}

// waves runs the server's waves in order, as its wave source hands them
// out: the planned ones (the mechanism check while polling its metric),
// then the probes of its capacity search; false when the server died.
func (r *runner) waves(ctx context.Context, i int, t Target, proc *fleet, apiKey string) bool {
	src, err := r.waveSource(t.Name)
	if err != nil {
		r.note("server %s: the capacity search did not start: %v", t.Name, err)
		return true
	}
	defer func() {
		if src.stopped != "" && src.stopped != "interrupted" {
			r.note("server %s: the capacity search stopped early: %s", t.Name, src.stopped)
		}
	}()
	seq := syncBase(r.cfg, r.planned, i)
	for {
		w, ok := src.Next()
		if !ok || ctx.Err() != nil {
			return true
		}
		if r.died(i, proc, fmt.Sprintf("between waves, before the %s wave at %s (repeat %d)", w.Kind, w.Label(), w.Repeat), nil) {
			return false
		}
		run, settled := r.release(ctx, &w, seq)
		if w.Kind != contract.KindMechanismCheck {
			seq++
		}
		if !run {
			continue
		}
		if w.Kind == contract.KindMechanismCheck {
			if !r.mechanismCheck(ctx, i, t, proc, apiKey, w) {
				return false
			}
			continue
		}
		clock := r.simClock(ctx, i, proc.urls[0], apiKey)
		res, err := r.driver.Wave(ctx, t, w)
		settled()
		var unsynced *drive.NotReleasedError
		if errors.As(err, &unsynced) {
			if ctx.Err() != nil {
				return true
			}
			r.out.Unsynced = unsynced.Err
			r.note("worker %s: the %s wave of %s at %s (repeat %d) was not released, and no later wave ran: %v", r.cfg.Segment, w.Kind, t.Name, w.Label(), w.Repeat, unsynced.Err)
			r.progress(t.Name, "fail", "not released: %v", unsynced.Err)
			return true
		}
		if clock != nil {
			r.serverSlip(ctx, clock, &res)
		}
		if err != nil && ctx.Err() == nil {
			r.note("server %s: %s wave at %s did not run: %v", t.Name, w.Kind, w.Label(), err)
		}
		if err != nil && ctx.Err() != nil && r.out.Stopped == nil {
			r.out.Stopped = err
		}
		r.waveProgress(t.Name, w, res)
		records := res.Records
		if res.Warmup != nil {
			records = append(append([]contract.Record(nil), res.Warmup.Records...), records...)
		}
		died := r.died(i, proc, fmt.Sprintf("during the %s wave at %s (repeat %d)", w.Kind, w.Label(), w.Repeat), records)
		src.Ended(ctx, w, res, err, died)
		if died {
			return false
		}
	}
}

// simClock reads a simulated server's clock before a wave, so that the
// wave can say how well the simulator kept its schedule; nil for a server
// that is not rehearse's simulator, or whose page could not be read.
func (r *runner) simClock(ctx context.Context, i int, baseURL, apiKey string) *simReading {
	s := r.cfg.Servers[i]
	if s.Simulated == "" || s.Metrics.Path == "" {
		return nil
	}
	sc := promscrape.Scraper{URL: baseURL + s.Metrics.Path, APIKey: apiKey}
	c, ok := scrapeSimClock(ctx, sc)
	if !ok {
		return nil
	}
	return &simReading{scraper: sc, before: c}
}

// simReading is a simulated server's clock at a wave's start.
type simReading struct {
	scraper promscrape.Scraper
	before  simClock
}

// serverSlip reads the simulator's clock again after the wave and journals
// the wave once more with what it did in between (a wave's last journal
// entry is the one that counts).
func (r *runner) serverSlip(ctx context.Context, c *simReading, res *WaveResult) {
	if res.Wave.ID == 0 {
		return
	}
	after, ok := scrapeSimClock(ctx, c.scraper)
	if !ok {
		return
	}
	slip, ok := slipBetween(c.before, after)
	if !ok {
		return
	}
	res.Wave.ServerSlip = slip
	_ = r.journal.WriteWave(res.Wave)
}

func (r *runner) waveProgress(server string, spec plan.Wave, res WaveResult) {
	ok, n, tokens := 0, len(res.Records), 0
	for _, rec := range res.Records {
		if rec.OK {
			ok++
			tokens += rec.OutputTokens
		}
	}
	wall := res.Wave.WallS
	if wall == 0 || res.Wave.Mode == contract.ModeSustained {
		wall = contract.GoodputWindowS(res.Wave.Mode, res.Records)
	}
	rate := 0.0
	if wall > 0 {
		rate = float64(tokens) / wall
	}
	if r.o.Progress != nil {
		w := res.Wave
		r.o.Progress(Event{Server: server, Step: "wave", Wave: &w,
			Text: fmt.Sprintf("%s wave at %s, repeat %d: %d/%d ok, %.1f tok/s, %.2f s", spec.Kind, spec.Label(), spec.Repeat, ok, n, rate, wall)})
	}
}

// mechanismCheck runs the separate, unrecorded wave while polling the
// server's metric (with evidence client, none), and keeps the client's
// view of the wave's concurrency beside it: the evidence itself where no
// sample of a metric was read. False when the server died during it.
func (r *runner) mechanismCheck(ctx context.Context, i int, t Target, proc *fleet, apiKey string, spec plan.Wave) bool {
	m := r.cfg.MechanismCheck
	s := r.cfg.Servers[i]
	var res drive.WaveResult
	var mc bundle.MechanismCheck
	if m.Evidence == config.EvidenceClient {
		var werr error
		res, werr = r.driver.Wave(ctx, t, spec)
		if werr != nil && ctx.Err() == nil {
			r.note("mechanism check on %s: the wave did not run: %v", s.Name, werr)
		}
		r.waveProgress(s.Name, spec, res)
		mc = bundle.MechanismCheck{Server: s.Name, Concurrency: m.Concurrency, Wave: res.Wave.ID, Series: [][2]float64{}, Evidence: bundle.EvidenceClient}
	} else {
		var ok bool
		if res, mc, ok = r.pollMechanism(ctx, s, t, proc, apiKey, spec); !ok {
			return true
		}
	}
	c := contract.ClientConcurrencyOf(res.Records)
	mc.Client = &c
	_ = r.journal.WriteMechanismCheck(mc)
	if mc.RestsOnClient() {
		r.progress(s.Name, "mechanism_check", "no server metric read; the client's records: at most %d requests streaming at once, %d in flight", c.StreamingMax, c.InFlightMax)
	} else {
		r.progress(s.Name, "mechanism_check", "%s max %s over %d samples%s", m.Metric, maxText(mc.Max), len(mc.Series), mechanismParts(mc))
	}
	return !r.died(i, proc, "during the mechanism-check wave", res.Records)
}

// pollMechanism runs the mechanism check's wave while polling the server's
// metric; false when the poller could not start (the wave did not run).
// Where no sample was read, the check rests on the client's records.
func (r *runner) pollMechanism(ctx context.Context, s config.Server, t Target, proc *fleet, apiKey string, spec plan.Wave) (drive.WaveResult, bundle.MechanismCheck, bool) {
	m := r.cfg.MechanismCheck
	period := m.Period.D()
	// Each replica's page is polled (a router's is not the engines'); the
	// series is their sum, kept per replica and per label set besides.
	var scrapers []promscrape.Scraper
	for _, u := range proc.urls {
		scrapers = append(scrapers, promscrape.Scraper{URL: u + s.Metrics.Path, Metric: m.Metric, APIKey: apiKey})
	}
	poller, err := promscrape.StartGroupPoller(ctx, scrapers, period)
	if err != nil {
		r.note("mechanism check on %s did not run: %v", s.Name, err)
		return drive.WaveResult{}, bundle.MechanismCheck{}, false
	}
	res, werr := r.driver.Wave(ctx, t, spec)
	// One more period so the series covers the wave's end.
	select {
	case <-ctx.Done():
	case <-time.After(period):
	}
	series := poller.Stop()
	if werr != nil && ctx.Err() == nil {
		r.note("mechanism check on %s: the wave did not run: %v", s.Name, werr)
	}
	r.waveProgress(s.Name, spec, res)
	origin := res.Release
	if origin.IsZero() {
		origin = time.Now()
	}
	mc := bundle.MechanismCheck{
		Server: s.Name, Metric: m.Metric, Concurrency: m.Concurrency, PeriodS: period.Seconds(),
		Wave: res.Wave.ID, Max: series.Max(), Series: series.Offsets(origin), Errors: series.Errors, NonFinite: series.NonFinite,
		Evidence: bundle.EvidenceMetric,
	}
	if mc.Series == nil {
		mc.Series = [][2]float64{}
	}
	mc.LabelSets = labelSeries(series, origin)
	for j, part := range series.Parts {
		rs := bundle.ReplicaSeries{Replica: j, Max: part.Max(), Series: part.Offsets(origin), Errors: part.Errors, LabelSets: labelSeries(part, origin)}
		mc.Replicas = append(mc.Replicas, rs)
	}
	if series.Errors > 0 {
		where := proc.urls[0] + s.Metrics.Path
		if len(proc.urls) > 1 {
			where = fmt.Sprintf("the %d replicas' %s", len(proc.urls), s.Metrics.Path)
		}
		r.note("mechanism check on %s: %d of %d scrapes of %s failed; the first: %s", s.Name, series.Errors, series.Errors+len(series.Samples), where, series.FirstError)
	}
	if len(mc.Series) == 0 {
		// Nothing was read: the check cannot rest on the metric.
		mc.Evidence = bundle.EvidenceClient
		r.note("mechanism check on %s: no sample of %s was read, so it rests on the client's records of its wave instead (mechanism_check.evidence: client)", s.Name, m.Metric)
	}
	return res, mc, true
}

// logNotes turns a server log's warnings into bundle notes, keeping what
// happened during the run apart from the noise after the deliberate stop.
func (r *runner) logNotes(server, path string) {
	n, err := supervise.ScanLog(path)
	if err != nil {
		r.note("%s.log could not be read: %v", server, err)
		return
	}
	file := filepath.Base(path)
	if n.WarningsDuringRunCount > 0 {
		r.note("%s: %d warning or error lines while the rehearsal ran (read them: they may matter), the first: %q", file, n.WarningsDuringRunCount, n.WarningsDuringRun[0])
	}
	if n.Stopped && (n.ShutdownLines > 0 || n.ShutdownNoiseCount > 0) {
		msg := fmt.Sprintf("%s: %d lines after the deliberate stop (line %d) are shutdown, not benchmark failures", file, n.ShutdownLines, n.StopLine)
		if n.ShutdownNoiseCount > 0 {
			msg += fmt.Sprintf("; %d of them warnings or errors, the first: %q", n.ShutdownNoiseCount, n.ShutdownNoise[0])
		}
		r.note("%s", msg)
	}
}

// Requests counts the recorded requests of the rehearsal and those that
// succeeded, with the failures by error kind.
func (o *Outcome) Requests() (ok, total int, byKind map[string]int) {
	byKind = map[string]int{}
	if o.Results == nil {
		return 0, 0, byKind
	}
	for _, r := range o.Results.Records {
		if r.Kind != contract.KindRecorded {
			continue
		}
		total++
		if r.OK {
			ok++
		} else {
			byKind[r.ErrorKind]++
		}
	}
	return ok, total, byKind
}
