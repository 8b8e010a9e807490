package search

import (
	"fmt"
	"strings"

	"github.com/rehearse/rehearse/internal/contract"
)

// checkStop replays the stop of probe wave w (SPEC §8) from its records:
// a wave that says why its measured part ended must show it. Ended by its
// stop rule (contract.EndedUntil), its records carry their place in the
// send order, no request was sent after the look (Look.Sent is their
// count), and the look was at the first look point whose first requests
// sent resolve (checkPrefixLook). Ended by a cap, the cap was reached (its
// requests all sent, or one ended past its duration): so an unresolved
// verdict only at a cap. A wave from before the rule was recorded (EndedBy "") cannot be
// replayed: StopNote says so.
func checkStop(spec Spec, slo contract.SLO, w contract.Wave, recs []contract.Record) error {
	if w.EndedBy == "" {
		return nil
	}
	if w.Look != nil && w.EndedBy != contract.EndedUntil {
		return fmt.Errorf("ended by %s, yet it records a look", w.EndedBy)
	}
	ordered, err := checkSendOrder(recs)
	if err != nil {
		return err
	}
	requests, duration := spec.Caps(w.Probe, w.Concurrency)
	switch w.EndedBy {
	case contract.EndedUntil:
		if w.Probe == ProbeScreen {
			return fmt.Errorf("a screen ended by a stop rule: a screen has none, it measures its %d requests", requests)
		}
		if ordered == nil {
			return fmt.Errorf("ended by its stop rule, yet its records carry no place in the send order (request)")
		}
		return checkPrefixLook(spec, slo, w.Look, ordered)
	case contract.EndedNumRequests:
		if requests == 0 || len(recs) != requests {
			return fmt.Errorf("ended by num_requests with %d records, its cap is %d", len(recs), requests)
		}
	case contract.EndedDuration:
		last := 0.0
		for _, r := range recs {
			last = max(last, r.EndS)
		}
		if duration == 0 || last < duration.Seconds() {
			return fmt.Errorf("ended by its duration, but its last request ended at %v s, before the cap of %v s", last, duration.Seconds())
		}
	case contract.EndedCanceled:
		return fmt.Errorf("ended by a cancellation, yet not marked stopped")
	default:
		return fmt.Errorf("ended_by %q: want until, num_requests, duration or canceled", w.EndedBy)
	}
	return nil
}

// checkSendOrder returns recs in send order when they carry their places
// (Record.Request), nil when none does (a bundle of the rule before it),
// and an error unless the places are those of every request sent once:
// 0, 1, … len(recs) − 1.
func checkSendOrder(recs []contract.Record) ([]contract.Record, error) {
	placed := 0
	for _, r := range recs {
		if r.Request != nil {
			placed++
		}
	}
	if placed == 0 {
		return nil, nil
	}
	if placed != len(recs) {
		return nil, fmt.Errorf("%d of its %d records carry their place in the send order (request), the others none", placed, len(recs))
	}
	ordered, _ := sendOrder(recs)
	for j, r := range ordered {
		if *r.Request != j {
			return nil, fmt.Errorf("its records' places in the send order are not 0 to %d, each once: place %d is %d", len(recs)-1, j, *r.Request)
		}
	}
	return ordered, nil
}

// checkPrefixLook replays a stop by the send-order prefix rule (StopRule):
// the look judged the first l.Prefix requests sent, a look point, and it
// is the first look point whose verdict over its prefix is resolved (an
// earlier one would have stopped the probe there); no request was sent
// after it. Which requests were in flight at the look, or how long after
// the prefix's last end the look came, the records cannot show (the look
// waits for the prefix to land, and sends are held off during it): the
// verdict does not depend on either.
func checkPrefixLook(spec Spec, slo contract.SLO, l *contract.Look, ordered []contract.Record) error {
	switch {
	case l == nil:
		return fmt.Errorf("ended by its stop rule, with no look recorded")
	case l.Prefix == 0:
		return fmt.Errorf("ended by its stop rule, and its records carry their place in the send order, yet its look names no prefix")
	case l.Sent != len(ordered):
		return fmt.Errorf("ended by its stop rule at %d sent, but has %d records: a request was sent after the look", l.Sent, len(ordered))
	case !Look(l.Prefix, LookUnit(spec.MinRequests, ordered[0].Concurrency)) || l.Prefix > l.Ended || l.Ended > l.Sent:
		return fmt.Errorf("ended by its stop rule at the first %d sent, %d ended of %d sent: not a look point of min_requests %d at %d clients (%d · 2^j), all ended",
			l.Prefix, l.Ended, l.Sent, spec.MinRequests, ordered[0].Concurrency, LookUnit(spec.MinRequests, ordered[0].Concurrency))
	}
	k, ok := firstResolved(ordered, slo, spec.MinRequests)
	switch {
	case ok && k < l.Prefix:
		return fmt.Errorf("ended by its stop rule at the first %d sent, but the verdict over the first %d was resolved already: it would have stopped there", l.Prefix, k)
	case !ok || k > l.Prefix:
		return fmt.Errorf("ended by its stop rule at the first %d sent, yet their verdict is unresolved: the stop was not justified", l.Prefix)
	}
	return nil
}

// StopNote says, for server's probe waves in waves, how many cannot have
// their stop replayed because they predate the recorded rule (no
// ended_by): verify accepts them on their verdicts alone. "" when none.
func StopNote(server string, waves []contract.Wave) string {
	n := 0
	for _, w := range waves {
		if isProbeWave(server, w) && w.EndedBy == "" {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("capacity of %s: %d probe waves do not record why they ended (ended_by): their stops predate the rule that records why a probe ended (SPEC §8), so their verdicts are recomputed but their stops are not replayed", server, n)
}

// isProbeWave reports whether w is one of server's probe waves that a
// replay measures: recorded, and not cut.
func isProbeWave(server string, w contract.Wave) bool {
	return w.Server == server && w.Probe != "" && w.Kind == contract.KindRecorded && w.Stopped == ""
}

// Fault says why c's search did not measure its server's capacity, ""
// when it did: the server failed during a probe (StopServerFailed), or
// every request of a probe failed with an error that is not a timeout (a
// server answering 5xx or breaking its streams gives no verdict on load).
// records are the bundle's records, those of c's probe waves among them.
func Fault(c Capacity, records []contract.Record) string {
	if c.StopReason == StopServerFailed && len(c.Probes) > 0 {
		last := c.Probes[len(c.Probes)-1]
		return fmt.Sprintf("capacity of %s: the server failed during the probe at %s (stop_reason %s): the search has no answer",
			c.Server, contract.ClientsLabel(last.Load), StopServerFailed)
	}
	errored := map[int]map[string]int{} // per wave, its non-timeout failures by kind
	for _, r := range records {
		if r.Kind == contract.KindRecorded && !r.OK && r.ErrorKind != contract.ErrTimeout {
			if errored[r.Wave] == nil {
				errored[r.Wave] = map[string]int{}
			}
			errored[r.Wave][r.ErrorKind]++
		}
	}
	for _, p := range c.Probes {
		if len(p.WaveIDs) == 0 || p.N == 0 {
			continue
		}
		kinds, n := errored[p.WaveIDs[0]], 0
		var parts []string
		for _, k := range contract.ErrorKinds {
			if kinds[k] > 0 {
				n += kinds[k]
				parts = append(parts, fmt.Sprintf("%s %d", k, kinds[k]))
			}
		}
		if n == p.N+p.AfterVerdict {
			return fmt.Sprintf("capacity of %s: every request of the probe at %s failed with an error, not a timeout (%s): the answer rests on the server's errors, not its capacity",
				c.Server, contract.ClientsLabel(p.Load), strings.Join(parts, ", "))
		}
	}
	return ""
}
