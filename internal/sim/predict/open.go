package predict

import (
	"fmt"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/workload"
)

// MaxOpenRequests bounds an open-loop prediction's arrivals (drive's
// MaxOpenRequests).
const MaxOpenRequests = 1_000_000

// OpenWorkload is one open-loop load a prediction runs (drive.OpenWave):
// request i is sent at the i-th offset of workload.OpenOffsets (the
// arrival schedule at a constant rate or along a ramp, or a trace's
// arrivals; the runner's drive.OpenSpec.Offsets is the same call) and sends the prompt at
// workload.PromptIndex(i, len(Prompts)); the wave ends after NumRequests
// arrivals or at DurationS (no request sent at or after it), whichever
// comes first.
type OpenWorkload struct {
	Prompts   []string
	MaxTokens int
	TimeoutS  float64
	// IgnoreEOS and MinTokens are the request fields of the same names.
	IgnoreEOS bool
	MinTokens int
	// PromptMaxTokens is each prompt's own max_tokens (ClosedWorkload's).
	PromptMaxTokens []int
	// RateRPS, Arrival (fixed, poisson, gamma, trace), Burstiness and Seed
	// make the schedule.
	RateRPS     float64
	Arrival     string
	Burstiness  float64
	Seed        int64
	NumRequests int
	DurationS   float64
	// Ramp, when set, moves the rate from its start to its end rate
	// (RateRPS unused), as drive.OpenSpec.Ramp.
	Ramp *contract.Ramp
	// ArrivalsS are a trace's send times, aligned with Prompts (arrival
	// trace: request i sends prompt i at ArrivalsS[i]).
	ArrivalsS []float64
	// Pacing is "" for rehearse's schedules, workload.PacingVLLM for vllm
	// bench serve's, as drive.OpenSpec.Pacing.
	Pacing string
}

func (w OpenWorkload) validate() error {
	cw := ClosedWorkload{Concurrencies: []int{1}, Repeats: 1, Prompts: w.Prompts, MaxTokens: w.MaxTokens, TimeoutS: w.TimeoutS, IgnoreEOS: w.IgnoreEOS, MinTokens: w.MinTokens, PromptMaxTokens: w.PromptMaxTokens}
	if err := cw.validate(); err != nil {
		return err
	}
	if w.Arrival == workload.ArrivalTrace {
		if w.NumRequests < 0 || w.DurationS < 0 || !finite(w.DurationS) {
			return fmt.Errorf("sim: open-loop trace replay: num_requests and duration must not be negative")
		}
		return nil
	}
	if w.NumRequests < 0 || w.DurationS < 0 || !finite(w.DurationS) || (w.NumRequests == 0 && w.DurationS == 0) {
		return fmt.Errorf("sim: open-loop workload at %g req/s: want num_requests or duration (or both) above 0", w.RateRPS)
	}
	return nil
}

func (w OpenWorkload) requests() requestSpec {
	return requestSpec{w.Prompts, w.MaxTokens, w.PromptMaxTokens, w.MinTokens, w.IgnoreEOS}
}

// offsets are the arrivals' send times, in seconds from the release: the
// runner's own (workload.OpenOffsets, as drive.OpenSpec.Offsets), so a
// prediction sends exactly when a live wave does.
func (w OpenWorkload) offsets() ([]float64, error) {
	if w.NumRequests > MaxOpenRequests {
		return nil, fmt.Errorf("sim: open-loop workload of more than %d requests", MaxOpenRequests)
	}
	if w.Ramp == nil && w.Arrival != workload.ArrivalTrace && w.NumRequests == 0 && w.RateRPS*w.DurationS > MaxOpenRequests {
		return nil, fmt.Errorf("sim: open-loop workload of more than %d requests at %g req/s", MaxOpenRequests, w.RateRPS)
	}
	l := workload.OpenLoad{
		RateRPS: w.RateRPS, Arrival: w.Arrival, Burstiness: w.Burstiness, Seed: w.Seed,
		NumRequests: w.NumRequests, Duration: time.Duration(w.DurationS * float64(time.Second)), Ramp: w.Ramp,
		Prompts: len(w.Prompts), MaxRequests: MaxOpenRequests, Pacing: w.Pacing,
	}
	for _, a := range w.ArrivalsS {
		l.Arrivals = append(l.Arrivals, time.Duration(a*float64(time.Second)))
	}
	offs, err := workload.OpenOffsets(l)
	if err != nil {
		return nil, fmt.Errorf("sim: open-loop workload: %w", err)
	}
	if len(offs) > MaxOpenRequests {
		return nil, fmt.Errorf("sim: open-loop workload of more than %d requests", MaxOpenRequests)
	}
	out := make([]float64, len(offs))
	for i, o := range offs {
		out[i] = o.Seconds()
	}
	return out, nil
}

// Open runs one open-loop wave of w through the profile's engine on
// the virtual clock, with the same engine stepping as Closed's
// waves (engine.Run): every arrival is sent at its schedule offset, after
// the profile's request overhead and frontend like any other request, and
// no arrival waits for another (no max_concurrency). Its one wave is of
// kind recorded and mode open, timed from its release (offset 0) as
// package drive records it. It is deterministic: the same seed, the same
// records.
func Open(p *engine.Profile, w OpenWorkload, o Options) (*Result, error) {
	o, plans, cache, err := prepare(p, w, o)
	if err != nil {
		return nil, err
	}
	offs, err := w.offsets()
	if err != nil {
		return nil, err
	}
	reqs := make([]*engine.Request, len(offs))
	for i, off := range offs {
		prompt := workload.PromptIndex(i, len(w.Prompts))
		reqs[i] = plans[prompt].request(i, prompt)
		reqs[i].AtS = off
	}
	if err := engine.Run(p, reqs, w.TimeoutS, cache, nil); err != nil {
		return nil, err
	}
	wave := contract.Wave{ID: 0, Server: o.Server, Repeat: 1, Kind: contract.KindRecorded, Mode: contract.ModeOpen,
		RequestRateRPS: w.RateRPS, Arrival: w.Arrival, Burstiness: w.Burstiness, Seed: w.Seed, Ramp: w.Ramp}
	pr := &Result{}
	recs := make([]contract.Record, 0, len(reqs))
	for _, r := range reqs {
		rec := record(r, wave, 0)
		rec.IntendedStartS = r.AtS
		recs = append(recs, rec)
	}
	wave.WallS = contract.WaveWallS(recs)
	pr.Waves = append(pr.Waves, wave)
	pr.Records = recs
	pr.Aggregates = contract.Aggregates(pr.Waves, pr.Records, []string{o.Server}, "")
	return pr, nil
}
