package bundle

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
)

// mergeSegments joins the segment bundles of one split plan (SPEC §10),
// one per worker, into the bundle of the whole plan: each wave is rejoined
// from every worker's share of it (one merged wave per server, load,
// kind and repeat, holding the records of all workers with their global
// client and request indices), its per-worker releases and their spread
// kept beside the largest clock-offset uncertainty, and every aggregate
// recomputed from the raw records.
//
// Record times stay relative to the release the workers agreed on when
// every worker's wave carries the same release_at (each worker timed its
// records from that instant on its clock, corrected by its offset), which
// is then the merged wave's started_at; a wave released at each worker's
// own instant (the measured part of a sustained wave after warm-up
// requests) is rebased onto its earliest release by the workers'
// started_at and clock offsets.
//
// Refused, naming the bundle and field: a part that is no segment,
// segments of different plans (plan_digest) or counts, the same segment
// twice, missing segments, a worker whose offset uncertainty exceeds
// o.MaxOffsetUncertaintyS, and a record of another worker's share.
func mergeSegments(parts []*Results, names []string, o MergeOptions) (*Results, error) {
	order, err := checkSegments(parts, names, o)
	if err != nil {
		return nil, err
	}
	out := segmentsHeader(parts, order)
	groups, waveOf, err := groupSegmentWaves(parts, names, order)
	if err != nil {
		return nil, err
	}
	ids := map[*waveGroup]int{}
	for gi, g := range groups {
		ids[g] = gi + 1
		w, recs, err := g.join(gi+1, parts, names, order)
		if err != nil {
			return nil, err
		}
		out.Waves = append(out.Waves, w)
		out.Records = append(out.Records, recs...)
	}
	if err := segmentsTail(out, parts, names, order, waveOf, ids); err != nil {
		return nil, err
	}
	out.Recompute()
	return out, nil
}

// segmentsTail is mergeSegments after the waves are joined (ids: each
// group's merged wave id): the mechanism check, the parts' notes and the
// merge's own.
func segmentsTail(out *Results, parts []*Results, names []string, order []int, waveOf []map[int]*waveGroup, ids map[*waveGroup]int) error {
	for k, pi := range order {
		p := parts[pi]
		if m := p.MechanismCheck; m != nil {
			if out.MechanismCheck != nil {
				return fmt.Errorf("%s: a second mechanism check (worker 0 runs it alone)", names[pi])
			}
			c := *m
			if g, ok := waveOf[k][m.Wave]; ok {
				c.Wave = ids[g]
			}
			out.MechanismCheck = &c
		}
		for _, note := range p.Notes {
			out.Notes = append(out.Notes, fmt.Sprintf("[worker %d] %s", k, note))
		}
	}
	if out.MechanismCheck == nil {
		out.Workload.MechanismCheck = nil
	}
	w := parts[order[0]].Provenance.Worker
	out.Notes = append(out.Notes, fmt.Sprintf("Merged by rehearse merge from the %d segments of plan %s: %v; each wave's records are all its workers', rejoined by their global client and request indices.",
		w.Count, shortDigest(w.PlanDigest), orderedNames(names, order)))
	return nil
}

// checkSegments refuses parts that are not the segments of one plan, each
// once, all there, each worker's clock known well enough (at its start and
// at every wave's barrier); it returns the
// parts' indices in worker order.
func checkSegments(parts []*Results, names []string, o MergeOptions) ([]int, error) {
	first := parts[0]
	var n int
	var digest string
	byIndex := map[int]int{}
	for i, p := range parts {
		w := p.Provenance.Worker
		if w == nil {
			return nil, fmt.Errorf("%s: no provenance.worker: it is not a segment of a split plan, and segments merge only with the other segments of their plan", names[i])
		}
		if i == 0 {
			n, digest = w.Count, w.PlanDigest
		}
		switch {
		case w.Count != n:
			return nil, fmt.Errorf("%s: provenance.worker.count %d, %s's is %d: the segments of one plan share their count", names[i], w.Count, names[0], n)
		case w.PlanDigest != digest:
			return nil, fmt.Errorf("%s: provenance.worker.plan_digest %s differs from %s's %s: segments of different plans", names[i], shortDigest(w.PlanDigest), names[0], shortDigest(digest))
		case w.Index < 0 || w.Index >= n:
			return nil, fmt.Errorf("%s: provenance.worker.index %d: want 0 to %d", names[i], w.Index, n-1)
		case o.MaxOffsetUncertaintyS > 0 && w.OffsetUncertaintyS > o.MaxOffsetUncertaintyS:
			return nil, fmt.Errorf("%s: provenance.worker.offset_uncertainty_s %.6f exceeds the bound %.6f (--max-offset-uncertainty): worker %d's clock is not known well enough to rejoin its waves", names[i], w.OffsetUncertaintyS, o.MaxOffsetUncertaintyS, w.Index)
		}
		if j, dup := byIndex[w.Index]; dup {
			return nil, fmt.Errorf("%s: provenance.worker.index %d is also %s's: overlapping segments (segment %d/%d given twice)", names[i], w.Index, names[j], w.Index, n)
		}
		byIndex[w.Index] = i
		if o.MaxOffsetUncertaintyS > 0 {
			for _, wv := range p.Waves {
				if u := waveUncertainty(wv, w); u > o.MaxOffsetUncertaintyS {
					return nil, fmt.Errorf("%s: waves[id %d].offset_uncertainty_s %.6f exceeds the bound %.6f (--max-offset-uncertainty): worker %d's clock at that wave's barrier is not known well enough to rejoin it", names[i], wv.ID, u, o.MaxOffsetUncertaintyS, w.Index)
				}
			}
		}
		if err := sameWorkload(first.Workload, p.Workload); err != nil {
			return nil, fmt.Errorf("%s: workload differs from %s's: %v", names[i], names[0], err)
		}
		if !sameSLO(first.SLO, p.SLO) {
			return nil, fmt.Errorf("%s: slo %s differs from %s's %s", names[i], sloLabel(p.SLO), names[0], sloLabel(first.SLO))
		}
		if p.Provenance.Tokenizer.SHA256 != first.Provenance.Tokenizer.SHA256 {
			return nil, fmt.Errorf("%s: counted with tokenizer %s, %s with %s", names[i], p.Provenance.Tokenizer.SHA256, names[0], first.Provenance.Tokenizer.SHA256)
		}
		if len(p.Capacity) > 0 {
			return nil, fmt.Errorf("%s: holds a capacity search, which is not split among workers", names[i])
		}
	}
	var missing []string
	order := make([]int, n)
	for k := range n {
		pi, ok := byIndex[k]
		if !ok {
			missing = append(missing, fmt.Sprintf("%d/%d", k, n))
		}
		order[k] = pi
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing segments %s of plan %s (given %d of %d): the merged bundle would not hold the whole plan", strings.Join(missing, ", "), shortDigest(digest), len(parts), n)
	}
	return order, nil
}

// segmentsHeader is the merged bundle's header: worker 0's, with every
// worker in provenance.workers, the earliest start, the latest finish, and
// the GPUs and runtimes any worker saw.
func segmentsHeader(parts []*Results, order []int) *Results {
	base := parts[order[0]]
	out := &Results{
		Schema: Schema, Provenance: base.Provenance, Workload: base.Workload,
		Baseline: base.Baseline, SLO: base.SLO, Servers: slices.Clone(base.Servers),
	}
	out.Provenance.Worker, out.Provenance.Workers = nil, nil
	for k, pi := range order {
		p := parts[pi]
		w := *p.Provenance.Worker
		w.Host = p.Provenance.Host.Hostname
		out.Provenance.Workers = append(out.Provenance.Workers, w)
		if p.Provenance.StartedAt != "" && (out.Provenance.StartedAt == "" || p.Provenance.StartedAt < out.Provenance.StartedAt) {
			out.Provenance.StartedAt = p.Provenance.StartedAt
		}
		if p.Provenance.FinishedAt > out.Provenance.FinishedAt {
			out.Provenance.FinishedAt = p.Provenance.FinishedAt
		}
		out.Provenance.addMachines(p.Provenance)
		for j, s := range p.Servers {
			if k > 0 && j < len(out.Servers) && s.Exit != "" && s.Exit != out.Servers[j].Exit {
				out.Servers[j].Exit = joinNonEmpty(out.Servers[j].Exit, s.Exit)
			}
		}
	}
	return out
}

// waveGroup is one wave of the plan: each worker's share of it.
type waveGroup struct {
	members []waveShare
}

// waveShare is one worker's share of a wave: its wave and records, and
// (set by join) its release on the coordinator's clock.
type waveShare struct {
	worker int
	wave   contract.Wave
	recs   []contract.Record
	origin time.Time
}

// groupSegmentWaves groups every worker's waves by what they are in the
// plan (in the order they first appear, worker 0 first), and maps each
// worker's wave ids to their group. It refuses a record of a wave its part
// does not hold, and one of another worker's share.
func groupSegmentWaves(parts []*Results, names []string, order []int) ([]*waveGroup, []map[int]*waveGroup, error) {
	n := len(order)
	var groups []*waveGroup
	byKey := map[string]*waveGroup{}
	waveOf := make([]map[int]*waveGroup, n)
	for k, pi := range order {
		p := parts[pi]
		byWave := RecordsByWave(p.Records)
		waveOf[k] = map[int]*waveGroup{}
		for _, w := range p.Waves {
			key := segmentWaveKey(w)
			g := byKey[key]
			if g == nil {
				g = &waveGroup{}
				byKey[key] = g
				groups = append(groups, g)
			}
			for _, m := range g.members {
				if m.worker == k {
					return nil, nil, fmt.Errorf("%s: two waves are the same wave of the plan (%s, %s at %s, repeat %d)", names[pi], w.Server, w.Kind, contract.KeyOf(w).LoadLabel(), w.Repeat)
				}
			}
			g.members = append(g.members, waveShare{worker: k, wave: w, recs: byWave[w.ID]})
			waveOf[k][w.ID] = g
		}
		for j, r := range p.Records {
			if _, ok := waveOf[k][r.Wave]; !ok {
				return nil, nil, fmt.Errorf("%s: a record names wave %d, which the part does not have", names[pi], r.Wave)
			}
			// Client (or request) c is worker c mod N's: a record of
			// another's share means the segments overlap.
			if r.Kind != contract.KindMechanismCheck && r.Client%n != k {
				return nil, nil, fmt.Errorf("%s: records[%d].client %d is worker %d's share, not worker %d's: overlapping segments", names[pi], j, r.Client, r.Client%n, k)
			}
		}
	}
	return groups, waveOf, nil
}

// origins sets each share's release on the coordinator's clock and
// returns the merged wave's origin: the agreed release when every share
// carries the same one (each share's release is then its lateness after
// it), else the earliest of the shares' started_at corrected by their
// workers' offsets. rebase says whether records must move onto it.
func (g *waveGroup) origins(parts []*Results, names []string, order []int) (origin time.Time, rebase bool, err error) {
	agreed := g.members[0].wave.ReleaseAt
	for _, m := range g.members {
		if m.wave.ReleaseAt != agreed {
			agreed = ""
		}
	}
	if agreed != "" {
		at, err := time.Parse(time.RFC3339Nano, agreed)
		if err != nil {
			return time.Time{}, false, fmt.Errorf("%s: waves[id %d].release_at %q: %v", names[order[g.members[0].worker]], g.members[0].wave.ID, agreed, err)
		}
		for i := range g.members {
			m := &g.members[i]
			late := 0.0
			if m.wave.ReleaseLateS != nil {
				late = *m.wave.ReleaseLateS
			}
			m.origin = at.Add(seconds(late))
		}
		return at, false, nil
	}
	for i := range g.members {
		m := &g.members[i]
		pi := order[m.worker]
		at, err := time.Parse(time.RFC3339Nano, m.wave.StartedAt)
		if err != nil {
			return time.Time{}, false, fmt.Errorf("%s: waves[id %d].started_at %q: %v", names[pi], m.wave.ID, m.wave.StartedAt, err)
		}
		m.origin = at.Add(seconds(waveOffset(m.wave, parts[pi].Provenance.Worker)))
		if origin.IsZero() || m.origin.Before(origin) {
			origin = m.origin
		}
	}
	return origin, true, nil
}

// join is the merged wave of the group, id id, and its records: the
// workers' counts summed, their releases and spread beside the largest
// offset uncertainty, wall_s and release_spread_s recomputed.
func (g *waveGroup) join(id int, parts []*Results, names []string, order []int) (contract.Wave, []contract.Record, error) {
	origin, rebase, err := g.origins(parts, names, order)
	if err != nil {
		return contract.Wave{}, nil, err
	}
	w := g.members[0].wave
	w.ID, w.ReleaseLateS, w.ClockOffsetS = id, nil, nil
	w.Waited, w.NotSent, w.ClientCPUS, w.Stopped, w.Workers = 0, 0, 0, "", nil
	w.StartedAt = origin.UTC().Format(time.RFC3339Nano)
	var recs []contract.Record
	unc, lo, hi := 0.0, 0.0, 0.0
	for mi, m := range g.members {
		mw := m.wave
		w.Waited += mw.Waited
		w.NotSent += mw.NotSent
		w.ClientCPUS += mw.ClientCPUS
		w.Cold = w.Cold || mw.Cold
		if mw.Stopped != "" {
			w.Stopped = joinNonEmpty(w.Stopped, fmt.Sprintf("worker %d: %s", m.worker, mw.Stopped))
		}
		if st := mw.ClientStalls; st != nil && (w.ClientStalls == nil || st.MaxS > w.ClientStalls.MaxS) {
			c := *st
			w.ClientStalls = &c
		}
		if w.ServerSlip == nil && mw.ServerSlip != nil {
			c := *mw.ServerSlip
			w.ServerSlip = &c
		}
		rel := m.origin.Sub(origin).Seconds()
		if mi == 0 || rel < lo {
			lo = rel
		}
		if mi == 0 || rel > hi {
			hi = rel
		}
		unc = max(unc, waveUncertainty(mw, parts[order[m.worker]].Provenance.Worker))
		w.Workers = append(w.Workers, contract.WorkerRelease{Worker: m.worker, StartedAt: mw.StartedAt, ReleaseS: rel, Records: len(m.recs)})
		for _, r := range m.recs {
			r.Wave = id
			if rebase && rel != 0 {
				shiftRecord(&r, rel)
			}
			recs = append(recs, r)
		}
	}
	spread := hi - lo
	w.WorkerReleaseSpreadS, w.OffsetUncertaintyS = &spread, &unc
	sort.SliceStable(recs, func(a, b int) bool {
		x, y := recs[a], recs[b]
		if x.Client != y.Client {
			return x.Client < y.Client
		}
		if x.Turn != y.Turn {
			return x.Turn < y.Turn
		}
		return x.StartS < y.StartS
	})
	w.WallS = contract.WaveWallS(recs)
	if contract.IsClosed(w.Mode) {
		w.ReleaseSpreadS = contract.WaveReleaseSpreadS(recs)
	}
	return w, recs, nil
}

// segmentWaveKey is what a wave is in the plan, the same for every
// worker's share of it.
func segmentWaveKey(w contract.Wave) string {
	ramp, _ := json.Marshal(w.Ramp)
	return fmt.Sprintf("%s|%s|%s|%d|%d|%v|%s|%v|%d|%d|%s|%s", w.Server, w.Kind, w.Mode, w.Concurrency, w.Repeat,
		w.RequestRateRPS, w.Arrival, w.Burstiness, w.Seed, w.MaxConcurrency, ramp, w.Probe)
}

// shiftRecord moves a record's times by d seconds (onto another origin).
func shiftRecord(r *contract.Record, d float64) {
	r.IntendedStartS += d
	r.StartS += d
	r.EndS += d
	if r.FirstContentS != nil {
		v := *r.FirstContentS + d
		r.FirstContentS = &v
	}
	if r.FirstTokenS != nil {
		v := *r.FirstTokenS + d
		r.FirstTokenS = &v
	}
	ct := make([]float64, len(r.ChunkTimesS))
	for i, t := range r.ChunkTimesS {
		ct[i] = t + d
	}
	r.ChunkTimesS = ct
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func orderedNames(names []string, order []int) []string {
	out := make([]string, len(order))
	for k, pi := range order {
		out[k] = names[pi]
	}
	return out
}

func shortDigest(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

// waveOffset is a worker's clock offset at wave w: the one measured at the
// wave's barrier, else the worker's (measured once, at its start).
func waveOffset(w contract.Wave, worker *Worker) float64 {
	if w.ClockOffsetS != nil {
		return *w.ClockOffsetS
	}
	return worker.ClockOffsetS
}

// waveUncertainty is the uncertainty of waveOffset's offset.
func waveUncertainty(w contract.Wave, worker *Worker) float64 {
	if w.ClockOffsetS != nil && w.OffsetUncertaintyS != nil {
		return *w.OffsetUncertaintyS
	}
	return worker.OffsetUncertaintyS
}
