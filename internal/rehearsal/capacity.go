package rehearsal

import (
	"context"
	"fmt"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/search"
)

// waveSource hands the runner one server's waves, one at a time: its
// planned waves, then, when the rehearsal searches capacity, each probe
// the search asks for once it has the verdict of the one before (DESIGN:
// a search is a source of waves for the one runner, not a second loop).
type waveSource struct {
	planned []plan.Wave
	next    int

	search *search.Search // nil: no capacity search
	spec   search.Spec
	slo    contract.SLO
	probe  search.Probe // the probe of the wave handed out last
	// repeats counts the recorded sustained waves run so far per load, so
	// a probe's wave carries the next repeat number of its aggregate.
	repeats map[int]int
	// publish receives the search's standing after each probe; probed
	// reports it as progress.
	publish func(search.Capacity)
	probed  func(search.Capacity)
	// stopped is why the search stopped early, for a note ("" while it
	// runs or once it ended by itself).
	stopped string
}

// waveSource returns server's source of waves, and publishes its search's
// starting point (so a search killed before its first probe is bundled
// as begun).
func (r *runner) waveSource(server string) (*waveSource, error) {
	src := &waveSource{planned: plan.Server(r.planned, server), repeats: map[int]int{}}
	for _, w := range src.planned {
		if w.Kind == contract.KindRecorded && w.Mode == contract.ModeSustained {
			src.repeats[w.Concurrency] = max(src.repeats[w.Concurrency], w.Repeat)
		}
	}
	c := r.cfg.Capacity
	if c == nil || r.res.SLO == nil {
		return src, nil
	}
	src.spec, src.slo = c.Spec(server), *r.res.SLO
	if p, ok := r.predicted[server]; ok {
		src.spec.Predicted = &p.Bracket
	}
	s, err := search.New(src.spec.Config(src.slo.AttainmentTarget))
	if err != nil {
		return nil, err
	}
	src.search = s
	src.publish = func(c search.Capacity) { r.setCapacity(c) }
	src.probed = func(c search.Capacity) {
		if r.o.Progress != nil {
			r.o.Progress(Event{Server: server, Step: "probe", Capacity: &c})
		}
	}
	src.publish(search.NewCapacity(server, src.spec, src.slo, s.Result()))
	return src, nil
}

// Next returns the next wave to run, false when there is none.
func (s *waveSource) Next() (plan.Wave, bool) {
	if s.next < len(s.planned) {
		s.next++
		return s.planned[s.next-1], true
	}
	if s.search == nil || s.stopped != "" {
		return plan.Wave{}, false
	}
	p, ok := s.search.Next()
	if !ok {
		return plan.Wave{}, false
	}
	s.probe = p
	s.repeats[p.Load]++
	requests, duration := s.spec.Caps(p.Kind(), p.Load)
	var until func([]contract.Record) bool
	if !p.Screen {
		// The probe looks at its interval once the first
		// min_requests · 2^k requests sent have ended, and ends once
		// the verdict over them is resolved: that is the probe's
		// verdict (search.Population); the requests in flight then
		// land outside it. A screen measures its requests, no more.
		until = search.StopRule(s.slo, s.spec.MinRequests, p.Load)
	}
	return plan.Wave{
		Kind: contract.KindRecorded, Mode: contract.ModeSustained, Concurrency: p.Load, Repeat: s.repeats[p.Load],
		Sustained: &plan.Bounds{
			NumRequests: requests, Duration: duration,
			WarmupRequests: s.spec.Warmup(p.Load, s.search.Observed() == 0),
			Until:          until,
			UntilEvery:     search.LookUnit(s.spec.MinRequests, p.Load),
			Probe:          p.Kind(),
		},
	}, true
}

// Ended takes the result of w, the wave Next returned last: a probe's
// outcome goes to the search, and its standing is published. died says the
// server died during the wave.
func (s *waveSource) Ended(ctx context.Context, w plan.Wave, res WaveResult, err error, died bool) {
	if w.Sustained == nil || w.Sustained.Probe == "" || s.search == nil {
		return
	}
	server := res.Wave.Server
	switch {
	case res.Wave.Stopped != "" || (err != nil && ctx.Err() != nil):
		// A probe cut by the interruption has no verdict: the search
		// stands where the last finished probe left it (and verify,
		// replaying the waves that were not cut, agrees).
		s.stopped = "interrupted"
		return
	case err != nil && res.Wave.ID == 0:
		s.stopped = fmt.Sprintf("the probe at %s did not run: %v", contract.ClientsLabel(w.Concurrency), err)
		return
	}
	o := s.probe.Measure(res.Wave.ID, res.Records, s.slo, s.spec)
	// A server that died, or one reached over the network that refused
	// every connection of the probe, has gone away: that is no verdict on
	// its capacity, and no later probe would be one either.
	o.ServerFailed = died || refusedAll(res.Records)
	if err := s.search.Observe(s.probe, o); err != nil {
		s.stopped = err.Error()
		return
	}
	c := search.NewCapacity(server, s.spec, s.slo, s.search.Result())
	s.publish(c)
	s.probed(c)
}

// refusedAll reports whether every request of records failed to connect.
func refusedAll(records []contract.Record) bool {
	for _, r := range records {
		if r.ErrorKind != contract.ErrConnect {
			return false
		}
	}
	return len(records) > 0
}

// setCapacity puts server c.Server's capacity entry into the header.
func (r *runner) setCapacity(c search.Capacity) {
	r.mu.Lock()
	found := false
	for i := range r.res.Capacity {
		if r.res.Capacity[i].Server == c.Server {
			r.res.Capacity[i], found = c, true
		}
	}
	if !found {
		r.res.Capacity = append(r.res.Capacity, c)
	}
	r.mu.Unlock()
	r.writeHeader()
}
