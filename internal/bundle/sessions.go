package bundle

import (
	"fmt"
	"sort"

	"github.com/rehearse/rehearse/internal/contract"
)

// checkSessionFields checks what a record says of its session (SPEC §2):
// session and turn come together, the session indexes workload.sessions
// and the turn is one of its turns, whose prompt is the record's.
func checkSessionFields(rec *contract.Record, wl *Workload, bad func(field, format string, args ...any)) {
	switch {
	case rec.Session == nil && rec.Turn == 0:
		return
	case rec.Session == nil:
		bad("turn", "%d without a session", rec.Turn)
		return
	case rec.Turn < 1:
		bad("turn", "%d in session %d: turns count from 1", rec.Turn, *rec.Session)
		return
	}
	s := *rec.Session
	if wl == nil {
		return
	}
	switch {
	case s < 0 || s >= len(wl.Sessions):
		bad("session", "%d is not an index into workload.sessions (%d sessions)", s, len(wl.Sessions))
	case rec.Turn > len(wl.Sessions[s].Turns):
		bad("turn", "%d, but session %d has %d turns", rec.Turn, s, len(wl.Sessions[s].Turns))
	case wl.Sessions[s].Turns[rec.Turn-1] != rec.Prompt:
		bad("prompt", "%d, but turn %d of session %d is prompt %d", rec.Prompt, rec.Turn, s, wl.Sessions[s].Turns[rec.Turn-1])
	}
}

// sessionRuns checks that the turns of every session run are in order in
// time: within its wave, a client's turn t+1 of a session follows its turn
// t of that session, which succeeded (a failed turn ends its session), and
// starts at or after turn t's end_s. The measured wave of a sustained run
// may open with later turns of sessions begun in its warm-up wave: those
// are not checked (nor their input_tokens re-counted), the two waves'
// times running from different releases. It returns the problems and, for each
// record of a later turn that follows its turn before, that record's index
// (so a turn's history can be rebuilt from the records).
func sessionRuns(r *Results, waves map[int]contract.Wave) ([]Problem, map[int]int) {
	type key struct{ wave, client int }
	byClient := map[key][]int{}
	for i := range r.Records {
		rec := &r.Records[i]
		if rec.Session != nil && rec.Turn > 0 {
			k := key{rec.Wave, rec.Client}
			byClient[k] = append(byClient[k], i)
		}
	}
	keys := make([]key, 0, len(byClient))
	for k := range byClient {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].wave != keys[b].wave {
			return keys[a].wave < keys[b].wave
		}
		return keys[a].client < keys[b].client
	})
	var probs []Problem
	prev := map[int]int{}
	for _, k := range keys {
		idx := byClient[k]
		sort.SliceStable(idx, func(a, b int) bool {
			ra, rb := &r.Records[idx[a]], &r.Records[idx[b]]
			if ra.StartS != rb.StartS {
				return ra.StartS < rb.StartS
			}
			return ra.Turn < rb.Turn
		})
		for j, i := range idx {
			rec := &r.Records[i]
			if rec.Turn == 1 {
				continue
			}
			bad := func(field, format string, args ...any) {
				probs = append(probs, Problem{File: ResultsFile, Server: rec.Server, Load: recordLabel(waves, rec),
					Field: fmt.Sprintf("records[%d].%s", i, field), Msg: fmt.Sprintf(format, args...)})
			}
			if j == 0 && continuesWarmup(waves, rec) {
				// Its session began in the sustained run's warm-up wave,
				// whose times run from another release.
				continue
			}
			if j == 0 {
				bad("turn", "turn %d of session %d, but client %d sent no turn %d of it before in wave %d", rec.Turn, *rec.Session, rec.Client, rec.Turn-1, rec.Wave)
				continue
			}
			before := &r.Records[idx[j-1]]
			switch {
			case *before.Session != *rec.Session || before.Turn != rec.Turn-1:
				bad("turn", "turn %d of session %d follows turn %d of session %d (records[%d]) from client %d in wave %d", rec.Turn, *rec.Session, before.Turn, *before.Session, idx[j-1], rec.Client, rec.Wave)
			case !before.OK:
				bad("turn", "turn %d of session %d was sent after turn %d (records[%d]) failed, which ends a session", rec.Turn, *rec.Session, before.Turn, idx[j-1])
			case rec.StartS < before.EndS:
				bad("start_s", "%s is before end_s %s of turn %d of its session (records[%d]): a turn is sent after the reply before it", num(rec.StartS), num(before.EndS), before.Turn, idx[j-1])
			default:
				prev[i] = idx[j-1]
			}
		}
	}
	return probs, prev
}

// continuesWarmup reports whether rec, a client's first record in its wave,
// may be a later turn of a session begun before the wave: the measured
// wave of a sustained run, whose clients go on from its warm-up wave.
func continuesWarmup(waves map[int]contract.Wave, rec *contract.Record) bool {
	w, ok := waves[rec.Wave]
	return ok && w.Mode == contract.ModeSustained && w.Kind != contract.KindWarmup
}

// sessionInputBytes is the bytes of the message contents record i sent:
// its own prompt's and, through prev, those of every turn before it in its
// session run, with their replies' text; false when the history is broken
// (a later turn whose turn before was not found) or no longer what was sent
// (a reply before it redacted).
func sessionInputBytes(r *Results, prev map[int]int, i int, promptBytes func(int) int) (int, bool) {
	n := 0
	for {
		rec := &r.Records[i]
		n += promptBytes(rec.Prompt)
		if rec.Turn <= 1 {
			return n, true
		}
		j, ok := prev[i]
		if !ok || r.Records[j].Redacted {
			// A redacted reply is shorter than the history that was sent.
			return 0, false
		}
		n += len(r.Records[j].Text)
		i = j
	}
}
