package bundle

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/rehearse/rehearse/internal/contract"
)

// MergeOptions are the choices of a merge.
type MergeOptions struct {
	// MechanismServer names the part's mechanism check to keep where
	// several parts hold one (the others stay in waves and records and are
	// described in a note).
	MechanismServer string
	// MaxOffsetUncertaintyS refuses a segment whose worker's clock offset
	// is known less well than this (seconds; 0: no bound).
	MaxOffsetUncertaintyS float64
}

// MergeWith combines the results of several parts of one rehearsal (say
// one server per GPU session), held whole, into one; PartSet.Merge calls
// it for the parts it does not stream. The parts must share the
// workload's prompts, max_tokens, temperature, timeout, endpoint and
// open-loop schedule; wave ids are renumbered, servers are joined by name
// (a server may appear in several parts, e.g. split by concurrency), and
// aggregates are recomputed from the records. names labels each part in
// errors and notes. Parts that are segments of one split plan
// (provenance.worker) are joined by mergeSegments instead: their waves
// are rejoined across workers rather than set side by side.
func MergeWith(parts []*Results, names []string, o MergeOptions) (*Results, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("nothing to merge")
	}
	for _, p := range parts {
		if p.Provenance.Worker != nil {
			return mergeSegments(parts, names, o)
		}
	}
	ids := make([][sha256.Size]byte, len(parts))
	counts := make([]int, len(parts))
	for i, p := range parts {
		ids[i], counts[i] = rehearsalID(p), len(p.Records)
	}
	out, err := mergeHeads(parts, ids, counts, names, o, func(i int, waveIDs map[int]int, out *Results) error {
		for _, r := range parts[i].Records {
			id, ok := waveIDs[r.Wave]
			if !ok {
				return noWave(names[i], r.Wave)
			}
			r.Wave = id
			out.Records = append(out.Records, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Recompute()
	return out, nil
}

// noWave is the error of a part's record naming a wave it does not have.
func noWave(name string, wave int) error {
	return fmt.Errorf("%s: a record names wave %d, which the part does not have", name, wave)
}

// mergeHeads is MergeWith less the records and the aggregates: the
// merged results of parts that are no segments, without records, their
// aggregates not recomputed. ids are the parts' rehearsalIDs and counts
// their numbers of records; records is called for each part in turn,
// where MergeWith takes its records, with the part's wave ids renumbered
// (old id → merged id), and may add them to out.
func mergeHeads(parts []*Results, ids [][sha256.Size]byte, counts []int, names []string, o MergeOptions, records func(i int, waveIDs map[int]int, out *Results) error) (*Results, error) {
	first := parts[0]
	m := &headMerger{
		out: &Results{
			Schema:     Schema,
			Provenance: first.Provenance,
			Workload:   first.Workload,
			Baseline:   first.Baseline,
			SLO:        first.SLO,
		},
		first:           first,
		names:           names,
		mechanismServer: o.MechanismServer,
		serverIdx:       map[string]int{},
		concs:           map[int]bool{},
	}
	out := m.out
	for i, p := range parts {
		if err := m.admit(parts, ids, counts, i); err != nil {
			return nil, err
		}
		if err := m.mergeProvenance(i, p); err != nil {
			return nil, err
		}
		for _, c := range p.Workload.Concurrencies {
			m.concs[c] = true
		}
		m.mergeServers(i, p)
		ids := m.renumberWaves(p)
		if err := records(i, ids, out); err != nil {
			return nil, err
		}
		if err := m.mergeMechanism(i, p, ids); err != nil {
			return nil, err
		}
		if err := m.mergeCapacity(i, p, ids); err != nil {
			return nil, err
		}
		for _, n := range p.Notes {
			out.Notes = append(out.Notes, fmt.Sprintf("[%s] %s", names[i], n))
		}
	}
	if err := m.finish(); err != nil {
		return nil, err
	}
	out.Notes = append(out.Notes, fmt.Sprintf("Merged by rehearse merge from %d parts: %v.", len(parts), names))
	return out, nil
}

// headMerger is mergeHeads' state while it takes the parts in turn: the
// merged results so far, the first part (which the others must agree
// with), the servers merged so far by name (their index in out.Servers),
// the concurrencies seen, and the next merged wave id.
type headMerger struct {
	out             *Results
	first           *Results
	names           []string
	mechanismServer string
	serverIdx       map[string]int
	concs           map[int]bool
	nextID          int
}

// admit refuses part i where it cannot join the first: another workload,
// another SLO, the rehearsal of an earlier part, or a baseline other than
// the one taken so far (which it otherwise sets).
func (m *headMerger) admit(parts []*Results, ids [][sha256.Size]byte, counts []int, i int) error {
	p, names := parts[i], m.names
	if err := sameWorkload(m.first.Workload, p.Workload); err != nil {
		return fmt.Errorf("%s: workload differs from %s's: %v", names[i], names[0], err)
	}
	if !sameSLO(m.first.SLO, p.SLO) {
		return fmt.Errorf("%s: slo %s differs from %s's %s: the parts' attainments would not be of one objective", names[i], sloLabel(p.SLO), names[0], sloLabel(m.first.SLO))
	}
	if err := distinctRehearsal(parts, ids, counts, i, names); err != nil {
		return err
	}
	if p.Baseline != nil {
		if m.out.Baseline != nil && *m.out.Baseline != *p.Baseline {
			return fmt.Errorf("%s: baseline %q differs from %q", names[i], *p.Baseline, *m.out.Baseline)
		}
		m.out.Baseline = p.Baseline
	}
	return nil
}

// mergeProvenance widens the merged provenance's span to part i's, refuses
// a part counted with another tokenizer or priced at another price, notes
// a part written by another tool, and adds the part's machines.
func (m *headMerger) mergeProvenance(i int, p *Results) error {
	out, first, names := m.out, m.first, m.names
	if p.Provenance.StartedAt != "" && (out.Provenance.StartedAt == "" || p.Provenance.StartedAt < out.Provenance.StartedAt) {
		out.Provenance.StartedAt = p.Provenance.StartedAt
	}
	if p.Provenance.FinishedAt > out.Provenance.FinishedAt {
		out.Provenance.FinishedAt = p.Provenance.FinishedAt
	}
	if p.Provenance.Tokenizer.SHA256 != first.Provenance.Tokenizer.SHA256 {
		return fmt.Errorf("%s: counted with tokenizer %s, %s with %s", names[i], p.Provenance.Tokenizer.SHA256, names[0], first.Provenance.Tokenizer.SHA256)
	}
	if pc, fc := p.Provenance.Cost, first.Provenance.Cost; (pc == nil) != (fc == nil) || (pc != nil && *pc != *fc) {
		return fmt.Errorf("%s: priced at %s, %s at %s: one bundle's cost figures need one price", names[i], costText(pc), names[0], costText(fc))
	}
	if i > 0 {
		if p.Provenance.Tool != first.Provenance.Tool {
			out.Notes = append(out.Notes, fmt.Sprintf("[%s] This part was written by %s; the bundle's tool record is %s's: %s.",
				names[i], toolName(p.Provenance.Tool), names[0], toolName(first.Provenance.Tool)))
		}
		out.Provenance.addMachines(p.Provenance)
	}
	return nil
}

// mergeServers joins part i's servers to the merged ones by name: a new
// name is added; a known one launched otherwise is noted, and its exit
// joined to the earlier one's.
func (m *headMerger) mergeServers(i int, p *Results) {
	out := m.out
	for _, s := range p.Servers {
		if j, ok := m.serverIdx[s.Name]; ok {
			prev := out.Servers[j]
			if !reflect.DeepEqual(prev.LaunchArgv, s.LaunchArgv) || prev.BaseURL != s.BaseURL {
				out.Notes = append(out.Notes, fmt.Sprintf("[%s] Server %s was launched again for this part, at %s as %q.", m.names[i], s.Name, s.BaseURL, s.LaunchArgv))
			}
			if s.Exit != "" && s.Exit != prev.Exit {
				out.Servers[j].Exit = joinNonEmpty(prev.Exit, s.Exit)
			}
			continue
		}
		m.serverIdx[s.Name] = len(out.Servers)
		out.Servers = append(out.Servers, s)
	}
}

// renumberWaves adds p's waves to the merged ones under the next merged
// ids and returns the renumbering (old id → merged id).
func (m *headMerger) renumberWaves(p *Results) map[int]int {
	ids := map[int]int{}
	for _, w := range p.Waves {
		ids[w.ID] = m.nextID
		w.ID = m.nextID
		m.nextID++
		m.out.Waves = append(m.out.Waves, w)
	}
	return ids
}

// mergeMechanism keeps part i's mechanism check (its wave renumbered by
// ids) where it is the one chosen, refusing a second; a check not chosen
// is described in a note.
func (m *headMerger) mergeMechanism(i int, p *Results, ids map[int]int) error {
	if p.MechanismCheck == nil {
		return nil
	}
	out := m.out
	mc := *p.MechanismCheck
	mc.Wave = ids[mc.Wave]
	keep := m.mechanismServer == "" || mc.Server == m.mechanismServer
	if keep && out.MechanismCheck != nil {
		return fmt.Errorf("%s: a second mechanism check (the first came from an earlier part); choose one with its server's name", m.names[i])
	}
	if keep {
		out.MechanismCheck = &mc
		out.Workload.MechanismCheck = p.Workload.MechanismCheck
	} else {
		out.Notes = append(out.Notes, fmt.Sprintf("[%s] A mechanism-check wave also ran on %s at %d clients (wave %d, not in the results table): %s.",
			m.names[i], mc.Server, mc.Concurrency, mc.Wave, mc.Finding()))
	}
	return nil
}

// mergeCapacity adds part i's capacity searches, their probes' waves
// renumbered by ids, refusing a second search of one server.
func (m *headMerger) mergeCapacity(i int, p *Results, ids map[int]int) error {
	out := m.out
	for _, c := range p.Capacity {
		// A server's search is one sequence of probes: two parts'
		// searches of it would not replay as one.
		for _, prev := range out.Capacity {
			if prev.Server == c.Server {
				return fmt.Errorf("%s: a second capacity search of %s (an earlier part holds one): a search is not split across parts", m.names[i], c.Server)
			}
		}
		c.Probes = slices.Clone(c.Probes)
		for k := range c.Probes {
			pr := &c.Probes[k]
			pr.WaveIDs = slices.Clone(pr.WaveIDs)
			for j, id := range pr.WaveIDs {
				pr.WaveIDs[j] = ids[id]
			}
		}
		out.Capacity = append(out.Capacity, c)
	}
	return nil
}

// finish sets the merged workload's concurrencies (every part's, sorted)
// and its mechanism check (none where no check was kept), and refuses a
// chosen mechanism server or a baseline that no part holds.
func (m *headMerger) finish() error {
	out := m.out
	out.Workload.Concurrencies = out.Workload.Concurrencies[:0:0]
	for c := range m.concs {
		out.Workload.Concurrencies = append(out.Workload.Concurrencies, c)
	}
	sort.Ints(out.Workload.Concurrencies)
	if m.mechanismServer != "" && (out.MechanismCheck == nil || out.MechanismCheck.Server != m.mechanismServer) {
		return fmt.Errorf("no part holds a mechanism check on %q", m.mechanismServer)
	}
	if out.MechanismCheck == nil {
		out.Workload.MechanismCheck = nil
	}
	if out.Baseline != nil {
		if _, ok := m.serverIdx[*out.Baseline]; !ok {
			return fmt.Errorf("baseline %q is in none of the parts", *out.Baseline)
		}
	}
	return nil
}

// distinctRehearsal refuses part i when it carries the same rehearsal as
// an earlier part (a bundle and its copy, or one part given twice): merged,
// every record of it would count twice. Two parts are the same rehearsal
// when they hold the same records, or, holding none, started at the same
// instant on the same host with the same waves (ids, from rehearsalID;
// counts are the parts' numbers of records).
func distinctRehearsal(parts []*Results, ids [][sha256.Size]byte, counts []int, i int, names []string) error {
	for j := range i {
		if ids[j] != ids[i] {
			continue
		}
		what := fmt.Sprintf("the same %d records", counts[i])
		if counts[i] == 0 {
			p := parts[i].Provenance
			what = fmt.Sprintf("no records, the same start %s on %s and the same waves", p.StartedAt, p.Host.Hostname)
		}
		return fmt.Errorf("%s holds the same rehearsal as %s (%s): merged, it would count twice", names[i], names[j], what)
	}
	return nil
}

// rehearsalID is a digest of what identifies a part's rehearsal: its
// records, or where it has none its start, host and waves.
func rehearsalID(p *Results) [sha256.Size]byte {
	var v any = p.Records
	if len(p.Records) == 0 {
		v = []any{p.Provenance.StartedAt, p.Provenance.Host.Hostname, p.Waves}
	}
	data, err := json.Marshal(v)
	if err != nil {
		// Not JSON (a NaN): no identity, so never a duplicate.
		data = fmt.Appendf(nil, "%p", p)
	}
	return sha256.Sum256(data)
}

// UnverifiedError is an input bundle that does not verify: the commands
// that read bundles (compare, merge, annotate) refuse it, since figures
// verify rejects cannot be compared, merged or annotated.
type UnverifiedError struct {
	Dir      string
	Problems []Problem
}

func (e *UnverifiedError) Error() string {
	return fmt.Sprintf("%s does not verify (%d problem(s); the first: %s); see rehearse verify %s", e.Dir, len(e.Problems), e.Problems[0], e.Dir)
}

// ReadVerified verifies the bundle dir and returns its results. A bundle
// whose results.json cannot be read gives that error; one that reads but
// does not verify gives an *UnverifiedError listing every problem.
func ReadVerified(ctx context.Context, dir string) (*Results, error) {
	res, rep, err := verifyDir(ctx, dir, Options{})
	if err := refusal(ctx, dir, res, rep.Problems, err); err != nil {
		return nil, err
	}
	return res, nil
}

// refusal is what a reader of verified bundles says of dir, which verify
// read as res (nil where results.json did not read) with probs and err:
// err, results.json's own error, an *UnverifiedError listing probs, or
// nil where the bundle verifies.
func refusal(ctx context.Context, dir string, res *Results, probs []Problem, err error) error {
	switch {
	case err != nil:
		return err
	case res == nil:
		if _, rerr := ReadResultsContext(ctx, dir); rerr != nil {
			return rerr
		}
		return &UnverifiedError{Dir: dir, Problems: probs}
	case len(probs) > 0:
		return &UnverifiedError{Dir: dir, Problems: probs}
	}
	return nil
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

func sameWorkload(a, b Workload) error {
	switch {
	case !slices.Equal(a.Prompts, b.Prompts):
		return fmt.Errorf("prompts")
	case a.MaxTokens != b.MaxTokens:
		return fmt.Errorf("max_tokens %d vs %d", b.MaxTokens, a.MaxTokens)
	case a.Temperature != b.Temperature:
		return fmt.Errorf("temperature %v vs %v", b.Temperature, a.Temperature)
	case a.TimeoutS != b.TimeoutS:
		return fmt.Errorf("timeout_s %v vs %v", b.TimeoutS, a.TimeoutS)
	case a.Endpoint != b.Endpoint:
		return fmt.Errorf("endpoint %q vs %q", b.Endpoint, a.Endpoint)
	case a.Repeats != b.Repeats:
		return fmt.Errorf("repeats %d vs %d", b.Repeats, a.Repeats)
	case !reflect.DeepEqual(a.ExtraBody, b.ExtraBody):
		return fmt.Errorf("extra_body")
	case !slices.Equal(a.ArrivalsS, b.ArrivalsS):
		return fmt.Errorf("arrivals_s")
	case !reflect.DeepEqual(a.Sessions, b.Sessions):
		// A record's session indexes them, as its prompt indexes prompts.
		return fmt.Errorf("sessions")
	case !reflect.DeepEqual(a.ThinkTime, b.ThinkTime):
		return fmt.Errorf("think_time")
	}
	return sameOpenLoop(a.Open, b.Open)
}

// sameOpenLoop refuses parts whose open-loop schedules differ: the merged
// workload keeps one part's open_loop, which would then misstate the
// others' rates and arrivals.
func sameOpenLoop(a, b *OpenLoop) error {
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil:
		return fmt.Errorf("open_loop present vs absent")
	case b == nil:
		return fmt.Errorf("open_loop absent vs present")
	case !slices.Equal(a.RequestRatesRPS, b.RequestRatesRPS):
		return fmt.Errorf("open_loop.request_rates_rps %v vs %v", b.RequestRatesRPS, a.RequestRatesRPS)
	case a.Arrival != b.Arrival:
		return fmt.Errorf("open_loop.arrival %q vs %q", b.Arrival, a.Arrival)
	case a.Burstiness != b.Burstiness:
		return fmt.Errorf("open_loop.burstiness %v vs %v", b.Burstiness, a.Burstiness)
	case a.Seed != b.Seed:
		return fmt.Errorf("open_loop.seed %d vs %d", b.Seed, a.Seed)
	case a.NumRequests != b.NumRequests:
		return fmt.Errorf("open_loop.num_requests %d vs %d", b.NumRequests, a.NumRequests)
	case a.DurationS != b.DurationS:
		return fmt.Errorf("open_loop.duration_s %v vs %v", b.DurationS, a.DurationS)
	case a.MaxConcurrency != b.MaxConcurrency:
		return fmt.Errorf("open_loop.max_concurrency %d vs %d", b.MaxConcurrency, a.MaxConcurrency)
	case !reflect.DeepEqual(a.Ramp, b.Ramp):
		return fmt.Errorf("open_loop.ramp %v vs %v", b.Ramp, a.Ramp)
	}
	return nil
}

// AppendPartLogs appends each part's server logs to the merged bundle out,
// each after a marker line naming its part, so a server whose waves ran in
// several parts keeps one complete log. A log is named by the part's
// results.json (servers[].log): it is read through the part's Dir, so a
// name outside the part, a link or a FIFO is an error naming it, and
// written inside out only, never through a link. A part without the log
// it names adds nothing.
func AppendPartLogs(ctx context.Context, out string, dirs []string, parts []*Results) error {
	root, err := os.OpenRoot(out)
	if err != nil {
		return err
	}
	defer root.Close()
	for i, dir := range dirs {
		for _, s := range parts[i].Servers {
			for _, name := range s.Logs() {
				if err := appendLog(ctx, root, dir, name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func appendLog(ctx context.Context, out *os.Root, part, name string) error {
	d, err := OpenDir(part)
	if err != nil {
		return err
	}
	defer d.Close()
	in, err := d.Open(ctx, name, FileLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := out.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND|openWriteFlags, 0o644)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", out.Name(), name, err)
	}
	fmt.Fprintf(f, "==> rehearse merge: log of part %s follows\n", part)
	_, err = io.CopyBuffer(f, in, make([]byte, readChunk))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil && !IsInterrupted(ctx, err) {
		return fmt.Errorf("%s: %s: %w", out.Name(), name, err)
	}
	return err
}

// toolName names a tool record in a note: name, version and commit, or
// that the commit is unknown.
func toolName(t Tool) string {
	s := strings.TrimSpace(t.Name + " " + t.Version)
	if t.Commit == "" {
		return s + " (commit unknown)"
	}
	return s + " (commit " + t.Commit + ")"
}

// sameSLO reports whether two parts judged requests by the same objectives
// and target.
func sameSLO(a, b *contract.SLO) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Objectives.String() == b.Objectives.String() && a.AttainmentTarget == b.AttainmentTarget
}

func sloLabel(s *contract.SLO) string {
	if s == nil {
		return "(none)"
	}
	return fmt.Sprintf("%q at %v", s.Objectives.String(), s.AttainmentTarget)
}

func costText(c *CostBasis) string {
	if c == nil {
		return "no price"
	}
	return fmt.Sprintf("$%v per GPU-hour × %d GPUs", c.GPUHourUSD, c.GPUs)
}

// addMachines adds the GPUs and runtimes of another part's provenance q
// that p does not list yet, in q's order.
func (p *Provenance) addMachines(q Provenance) {
	for _, g := range q.GPUs {
		if !slices.Contains(p.GPUs, g) {
			p.GPUs = append(p.GPUs, g)
		}
	}
	for _, r := range q.Runtimes {
		if !slices.Contains(p.Runtimes, r) {
			p.Runtimes = append(p.Runtimes, r)
		}
	}
}
