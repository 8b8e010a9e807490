// Package plottest builds synthetic rehearsal results for the tests of plots,
// the HTML report and compare: a closed-loop rehearsal of a serial server
// against a continuous-batching one, with a mechanism check, generated from a
// simple queueing model and a seed, so every test gets realistic shapes
// (serialization, timeouts, batching) without a server. Nothing in it is a
// measurement.
package plottest

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// Server is one synthetic server.
type Server struct {
	Name string
	// Serial serves one request at a time in arrival order (the seed's
	// lock-serialized baseline); otherwise all requests of a wave are
	// batched together.
	Serial bool
	// PrefillS is the time to first content of a lone request.
	PrefillS float64
	// TPOTS is the time per output token of a lone request.
	TPOTS float64
	// BatchSlowdown is, for a batching server, the fractional growth of
	// TPOT per additional running request.
	BatchSlowdown float64
}

// Options shapes the synthetic rehearsal.
type Options struct {
	Servers       []Server
	Baseline      string
	Concurrencies []int
	Repeats       int
	MaxTokens     int
	TimeoutS      float64
	Seed          uint64
	// Jitter is the relative spread of service times (0.05 = ±5%).
	Jitter float64
	// ColdFirstWave makes the first recorded wave of each server cold:
	// flagged, and twice as slow for a serial server.
	ColdFirstWave bool
	// MechanismCheck adds a mechanism-check wave against the last server at
	// the highest concurrency, polled every 100 ms.
	MechanismCheck bool
}

// Default is a rehearsal shaped like the seed's, shortened: naive (serial)
// against batching at 1, 8, 32 and 64 clients, three repeats, 32 tokens,
// a 20 s timeout, so the serial server times out at 32 and 64 clients.
func Default() Options {
	return Options{
		Servers: []Server{
			{Name: "naive", Serial: true, PrefillS: 0.08, TPOTS: 0.045},
			{Name: "batching", PrefillS: 0.02, TPOTS: 0.015, BatchSlowdown: 0.012},
		},
		Baseline:       "naive",
		Concurrencies:  []int{1, 8, 32, 64},
		Repeats:        3,
		MaxTokens:      32,
		TimeoutS:       20,
		Seed:           1,
		Jitter:         0.05,
		ColdFirstWave:  true,
		MechanismCheck: true,
	}
}

// anchor is the wall-clock anchor of the first wave; later waves follow it.
var anchor = time.Date(2026, 9, 20, 2, 0, 0, 0, time.UTC)

// Results builds the synthetic rehearsal with its aggregates computed by the
// contract.
func Results(o Options) *bundle.Results {
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	r := syntheticResults(bundle.Workload{
		Kind:             contract.ModeClosed,
		Concurrencies:    o.Concurrencies,
		Repeats:          o.Repeats,
		Prompts:          []string{"Explain batching.", "Write a haiku about queues."},
		MaxTokens:        o.MaxTokens,
		TimeoutS:         o.TimeoutS,
		PercentileMethod: contract.PercentileMethod,
	})
	if o.Baseline != "" {
		b := o.Baseline
		r.Baseline = &b
	}
	for _, s := range o.Servers {
		addServer(r, s)
	}
	clock, id := closedWaves(r, rng, o)
	if o.MechanismCheck && len(o.Servers) > 0 && len(o.Concurrencies) > 0 {
		clock = mechanismWave(r, rng, o, clock, id)
	}
	r.Provenance.FinishedAt = clock.Format(time.RFC3339)
	r.Recompute()
	return r
}

// syntheticResults is a bundle of workload w, started at anchor, with the
// provenance every synthetic bundle shares; it has no server yet.
func syntheticResults(w bundle.Workload) *bundle.Results {
	return &bundle.Results{
		Schema: bundle.Schema,
		Provenance: bundle.Provenance{
			Tool:               bundle.Tool{Name: "rehearse", Version: "(test)"},
			StartedAt:          anchor.Format(time.RFC3339),
			Host:               bundle.Host{Hostname: "test", OS: "linux", Arch: "amd64", CPUs: 2},
			Model:              bundle.Model{ID: "synthetic/model", Note: "synthetic test data"},
			Tokenizer:          bundle.Tokenizer{Name: "none", Source: "synthetic"},
			OutputTokensSource: "tokenizer",
			Simulation:         &bundle.Simulation{TimeScale: 1, Profiles: map[string]string{}, Note: "synthetic results built by package plottest; not a measurement"},
		},
		Workload: w,
		Notes:    []string{},
	}
}

// addServer adds s to r's servers, simulated by plottest.
func addServer(r *bundle.Results, s Server) {
	r.Servers = append(r.Servers, bundle.Server{Name: s.Name, BaseURL: "http://127.0.0.1:0", Simulated: "plottest"})
	r.Provenance.Simulation.Profiles[s.Name] = "plottest"
}

// closedWaves adds every recorded closed-loop wave of o to r, server by
// server, load by load, repeat by repeat, one after another from anchor;
// it returns when the last one ended and the next wave's id.
func closedWaves(r *bundle.Results, rng *rand.Rand, o Options) (clock time.Time, id int) {
	clock = anchor
	for _, s := range o.Servers {
		first := true
		for _, c := range o.Concurrencies {
			for rep := 1; rep <= o.Repeats; rep++ {
				cold := o.ColdFirstWave && first
				first = false
				w := contract.Wave{ID: id, Server: s.Name, Concurrency: c, Repeat: rep, Kind: contract.KindRecorded,
					Mode: contract.ModeClosed, StartedAt: clock.Format(time.RFC3339), Cold: cold}
				recs := wave(rng, o, s, w, cold)
				finish(&w, recs)
				r.Waves = append(r.Waves, w)
				r.Records = append(r.Records, recs...)
				clock = clock.Add(time.Duration((w.WallS + 1) * float64(time.Second)))
				id++
			}
		}
	}
	return clock, id
}

// mechanismWave adds to r, at clock, a mechanism-check wave (id) against
// o's last server at its highest concurrency, with its series of running
// requests polled every 100 ms; it returns when the wave ended.
func mechanismWave(r *bundle.Results, rng *rand.Rand, o Options, clock time.Time, id int) time.Time {
	s := o.Servers[len(o.Servers)-1]
	c := o.Concurrencies[len(o.Concurrencies)-1]
	w := contract.Wave{ID: id, Server: s.Name, Concurrency: c, Kind: contract.KindMechanismCheck,
		Mode: contract.ModeClosed, StartedAt: clock.Format(time.RFC3339)}
	recs := wave(rng, o, s, w, false)
	finish(&w, recs)
	r.Waves = append(r.Waves, w)
	r.Records = append(r.Records, recs...)
	m := &bundle.MechanismCheck{Server: s.Name, Metric: "vllm:num_requests_running", Concurrency: c, PeriodS: 0.1, Wave: id}
	max := 0.0
	for k := 0; float64(k)*m.PeriodS <= w.WallS+0.2; k++ {
		t := round(float64(k) * m.PeriodS)
		n := 0.0
		for _, rec := range recs {
			if rec.StartS <= t && t < rec.EndS {
				n++
			}
		}
		max = maxf(max, n)
		m.Series = append(m.Series, [2]float64{t, n})
	}
	m.Max = &max
	r.MechanismCheck = m
	r.Workload.MechanismCheck = &bundle.MechanismSpec{Server: s.Name, Metric: m.Metric, Concurrency: c, PeriodS: m.PeriodS}
	return clock.Add(time.Duration(w.WallS * float64(time.Second)))
}

func finish(w *contract.Wave, recs []contract.Record) {
	w.WallS = contract.WaveWallS(recs)
	w.ReleaseSpreadS = contract.WaveReleaseSpreadS(recs)
}

// served is one request of a closed-loop wave as the model serves it.
type served struct {
	client         int
	start, first   float64 // send, first content
	tpot, serviceS float64
}

// wave generates the records of one closed-loop wave.
func wave(rng *rand.Rand, o Options, s Server, w contract.Wave, cold bool) []contract.Record {
	recs := make([]contract.Record, 0, w.Concurrency)
	for _, q := range serve(rng, o, s, w.Concurrency, cold) {
		recs = append(recs, closedRecord(o, s, w, q))
	}
	return recs
}

// serve is the schedule of a wave of n clients, each sending at once (a
// few milliseconds apart): a serial server serves them one at a time in
// order of sending, a batching one all together, each slower by its
// BatchSlowdown; a cold serial server is twice as slow.
func serve(rng *rand.Rand, o Options, s Server, n int, cold bool) []served {
	jit := func() float64 { return 1 + o.Jitter*(2*rng.Float64()-1) }
	reqs := make([]served, n)
	for i := range reqs {
		reqs[i].client = i
		reqs[i].start = 0.0005 + 0.002*rng.Float64()
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return reqs[order[a]].start < reqs[order[b]].start })
	slow := 1.0
	if cold && s.Serial {
		slow = 2
	}
	free := 0.0 // serial: when the lock is released
	for _, i := range order {
		q := &reqs[i]
		prefill := s.PrefillS * jit() * slow
		tpot := s.TPOTS * jit() * slow
		begin := q.start
		if s.Serial {
			begin = maxf(q.start, free)
		} else {
			tpot *= 1 + s.BatchSlowdown*float64(n-1)
			prefill *= 1 + s.BatchSlowdown*float64(n-1)/4
		}
		q.first = begin + prefill
		q.tpot = tpot
		q.serviceS = prefill + tpot*float64(o.MaxTokens-1)
		if s.Serial {
			free = begin + q.serviceS
		}
	}
	return reqs
}

// closedRecord is the record of request q of wave w: its chunks up to
// o.MaxTokens, successful when all of them came before the timeout, else
// a timeout failure at the deadline.
func closedRecord(o Options, s Server, w contract.Wave, q served) contract.Record {
	rec := contract.Record{
		Kind: w.Kind, Server: s.Name, Concurrency: w.Concurrency, Repeat: w.Repeat, Wave: w.ID,
		Client: q.client, Prompt: q.client % 2,
		IntendedStartS: 0, StartS: round(q.start),
	}
	in := []int{4, 7}[q.client%2] // the two prompts' client-counted tokens
	rec.InputTokens = &in
	deadline := q.start + o.TimeoutS
	var chunks []float64
	for k := range o.MaxTokens {
		t := q.first + q.tpot*float64(k)
		if t > deadline {
			break
		}
		chunks = append(chunks, round(t))
	}
	rec.ChunkTimesS = chunks
	if len(chunks) > 0 {
		f := chunks[0]
		rec.FirstContentS = &f
	}
	rec.Text = strings.Repeat(" tok", len(chunks))
	rec.OutputTokens = len(chunks)
	if len(chunks) == o.MaxTokens {
		rec.OK = true
		rec.EndS = round(chunks[len(chunks)-1] + 0.0002)
		rec.FinishReason = "length"
		u := o.MaxTokens
		rec.UsageCompletionTokens = &u
	} else {
		rec.OK = false
		rec.EndS = round(deadline)
		rec.ErrorKind = contract.ErrTimeout
		rec.Error = fmt.Sprintf("no end of stream within %g s", o.TimeoutS)
	}
	return rec
}

// round keeps times at microsecond resolution, as a journal would.
func round(x float64) float64 { return float64(int64(x*1e6+0.5)) / 1e6 }

func maxf(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}
