package rehearsal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/coordinate"
	"github.com/rehearse/rehearse/internal/exitcode"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/workload"
)

// Synchronizer releases the waves of a split plan's workers together: it
// is asked, before each wave a worker runs (seq counts them from 0 over
// every server), for the instant every worker releases it, on this
// process's clock and as the coordinator wrote it, with the clock offset
// measured at the barrier. A coordinate.Client is one (it re-measures its
// offset and waits at the wave's barrier), coordinate.Fixed another.
type Synchronizer interface {
	Release(ctx context.Context, seq int) (plan.Release, error)
}

// Coordination is how a worker of a split plan joins the others (run's and
// bench's --coordinator, --start-at and --barrier-timeout; SPEC §10).
type Coordination struct {
	// Coordinator is the base URL of rehearse coordinate ("": none).
	Coordinator string
	// StartAt is the instant the first wave is released at (zero: none).
	StartAt time.Time
	// BarrierTimeout bounds one wait at a wave's barrier.
	BarrierTimeout time.Duration
}

// Join is the worker's link to the other workers of cfg's split plan: a
// coordinator client whose clock offset is measured now (with the token
// in $REHEARSE_COORDINATOR_TOKEN), or a fixed first release at StartAt;
// with it the worker's provenance so far, and what to call once the
// rehearsal ends (the worker reports done). A nil c, or a whole plan,
// has none; a worker that cannot reach the coordinator, an error (exit 1).
func (c *Coordination) Join(ctx context.Context, cfg *config.Rehearsal, prompts workload.Set) (Synchronizer, *bundle.Worker, func(), error) {
	if c == nil || cfg.Segment.Whole() {
		return nil, nil, func() {}, nil
	}
	w := &bundle.Worker{Coordinator: config.RedactURL(c.Coordinator)}
	if !c.StartAt.IsZero() {
		w.StartAt = c.StartAt.UTC().Format(time.RFC3339Nano)
	}
	planned := plan.WorkloadOf(cfg, prompts)
	if c.Coordinator == "" {
		// The runner refuses a plan of several waves with no synchronizer.
		if c.StartAt.IsZero() || SyncWaves(cfg, planned) > 1 {
			return nil, w, func() {}, nil
		}
		return coordinate.Fixed{At: c.StartAt}, w, func() {}, nil
	}
	cl := &coordinate.Client{
		URL: c.Coordinator, Worker: cfg.Segment.Index, Count: cfg.Segment.Count, Token: os.Getenv(coordinate.TokenEnv),
		Digest: PlanDigest(cfg, planned), BarrierTimeout: c.BarrierTimeout, StartAt: c.StartAt,
	}
	wait := time.Duration(config.DefaultCoordinatorWait) * time.Second
	if err := cl.MeasureWaiting(ctx, config.DefaultOffsetSamples, wait); err != nil {
		return nil, nil, nil, &exitcode.Error{Code: 1, Err: fmt.Errorf("--coordinator: %v", config.RedactURL(err.Error()))}
	}
	w.ClockOffsetS, w.OffsetUncertaintyS = cl.Offset.Seconds(), cl.Uncertainty.Seconds()
	done := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = cl.Done(dctx)
	}
	return cl, w, done, nil
}

// SegmentError is a split plan refused before any work.
type SegmentError struct{ Msg string }

func (e *SegmentError) Error() string { return e.Msg }

// SyncWaves is how many waves a worker of cfg's split plan waits at a
// barrier for: every planned wave of every server but the mechanism check
// (worker 0 runs it whole, alone, after the others).
func SyncWaves(cfg *config.Rehearsal, wl plan.Workload) int {
	n := 0
	for _, s := range cfg.Servers {
		for _, w := range plan.Server(wl, s.Name) {
			if w.Kind != contract.KindMechanismCheck {
				n++
			}
		}
	}
	return n
}

// checkSegment refuses a split plan the runner cannot release together:
// one of more than one wave with no synchronizer (no coordinator).
func checkSegment(o Options, wl plan.Workload) error {
	cfg := o.Rehearsal
	if cfg.Segment.Whole() {
		return nil
	}
	if msg := cfg.SegmentProblem(); msg != "" {
		return &SegmentError{Msg: "segment " + msg}
	}
	if n := SyncWaves(cfg, wl); o.Sync == nil && n > 1 {
		return &SegmentError{Msg: fmt.Sprintf("segment %s: the plan has %d waves, and without a coordinator (--coordinator URL) its workers cannot release them together; give one, or split a plan of one wave", cfg.Segment, n)}
	}
	return nil
}

// syncBase is the number of the first wave of server i that its workers
// release together: the synced waves of the servers before it. A wave's
// number comes from the plan, not from what this worker ran, so a worker
// that skipped a server (not ready) waits at that server's next wave, not
// at another's.
func syncBase(cfg *config.Rehearsal, wl plan.Workload, i int) int {
	before := *cfg
	before.Servers = cfg.Servers[:i]
	return SyncWaves(&before, wl)
}

// PlanDigest is the SHA-256 (hex) of the canonical plan: the workload as
// results.json records it (prompts, loads, seeds, schedules, sessions) and
// the servers it drives (name, base URL or URLs, model), with no segment in
// it. Segments of one plan carry the same digest
// (provenance.worker.plan_digest); the coordinator refuses a worker of
// another plan, and merge segments whose digests differ.
func PlanDigest(cfg *config.Rehearsal, wl plan.Workload) string {
	return digest(cfg, recordedWorkload(cfg, wl))
}

// digest is PlanDigest of the recorded workload wl.
func digest(cfg *config.Rehearsal, wl bundle.Workload) string {
	type server struct {
		Name    string `json:"name"`
		BaseURL string `json:"base_url"`
		Model   string `json:"model"`
		// BaseURLs are a balanced server's replicas already running.
		BaseURLs []string `json:"base_urls,omitempty"`
	}
	canon := struct {
		Workload bundle.Workload `json:"workload"`
		Servers  []server        `json:"servers"`
	}{Workload: wl}
	for _, s := range cfg.Servers {
		sv := server{Name: s.Name, BaseURL: config.RedactURL(s.BaseURL), Model: s.Model}
		for _, u := range s.BaseURLs {
			sv.BaseURLs = append(sv.BaseURLs, config.RedactURL(u))
		}
		canon.Servers = append(canon.Servers, sv)
	}
	data, err := json.Marshal(canon)
	if err != nil {
		// A workload that is not JSON (a NaN) has no canonical form; its
		// digest is of its error, so two such segments still agree.
		data = []byte(err.Error())
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// release prepares wave w of a split plan, the seq-th the workers release
// together: this worker's share of it, and how the driver asks for the
// instant the workers release it at (plan.Wave.Agree: from the
// synchronizer, once the wave is armed). A false skips the wave (a
// mechanism check on a worker other than 0). The returned func is called
// once the driver is done with the wave: if the wave never got as far as
// agreeing (it failed before it was armed), it still takes the wave's
// barrier, so the other workers are not held for it.
func (r *runner) release(ctx context.Context, w *plan.Wave, seq int) (bool, func()) {
	seg := r.cfg.Segment
	if seg.Whole() {
		return true, func() {}
	}
	if w.Kind == contract.KindMechanismCheck {
		// Its metric is the server's, not a worker's: worker 0 runs it
		// whole, once the others are done with the waves before it.
		return seg.Index == 0, func() {}
	}
	w.Segment = seg
	if r.o.Sync == nil {
		return true, func() {}
	}
	var asked bool
	w.Agree = func(ctx context.Context) (plan.Release, error) {
		asked = true
		return r.o.Sync.Release(ctx, seq)
	}
	return true, func() {
		if !asked && ctx.Err() == nil {
			_, _ = r.o.Sync.Release(ctx, seq)
		}
	}
}
