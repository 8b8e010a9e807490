package drive

import (
	"context"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/workload"
)

// A session is how a client goes through its work when the load has
// sessions (plan.Load.Sessions): instead of one prompt, a conversation of
// turns, turn t+1 sent only after turn t's reply ended (and the think
// time), carrying the whole history: the first turn's messages, then for
// each earlier turn the server's actual reply (its record's text) as an
// assistant message and the next user turn. A failed turn ends its
// session; its later turns are not sent. Each turn is a request with its
// own record (session, turn), and the waves count requests per turn:
//
//   - a closed wave's client runs one whole session, its first turn held
//     at the release barrier; the wave ends when every session ended;
//   - a sustained wave's client runs sessions back to back, each turn
//     taking one of the wave's requests, so num_requests and duration
//     bound turns (a session cut by the bound is not counted as failed);
//   - an open-loop wave starts a session at each arrival; its turns follow
//     in sequence, and the session holds its max_concurrency slot while
//     it lasts.
//
// A later turn's intended_start_s is the end of the turn before plus the
// think time, so an open-loop wave's lateness stays the client's own.
// A turn's input_tokens counts every message content it sends, the
// history included: the prompts' counts (plan.Load.InputTokens) plus the
// replies' output_tokens (re-tokenized text), so it is set only where the
// Driver has a Counter. A turn's body is built when it is sent, from a
// stream.Template marshalled once per wave and the session's history kept
// encoded, so a turn costs one copy of its history.
//
// Against replicas the client balances over, a session keeps to one
// replica, its history being that replica's cache: round-robin sends
// session s (its index in the workload) to replica s mod N; least-
// outstanding picks, at a session's first turn, the replica with the
// fewest sessions under way (the lowest index on a tie) and keeps it to
// the session's end. Each turn's record names the replica.
type sessionRunner struct {
	d *Driver
	l plan.Load
	// tmpls is one template per replica (one for a single address).
	tmpls   []*stream.Template
	balance string

	runs atomic.Int64 // sessions started, for a sustained wave's run index

	mu       sync.Mutex
	byClient map[int][]contract.Record
	// underway counts each replica's sessions under way (least-
	// outstanding).
	underway []int
}

// turnTag is what a session's turn adds to its record.
type turnTag struct {
	session, turn int
	// input is the turn's input_tokens (nil: not counted).
	input *int
	// replica is the replica the request went to (-1 or absent: none).
	replica *int
}

func (tag turnTag) apply(r *contract.Record) {
	r.Replica = tag.replica
	if tag.turn == 0 {
		return
	}
	s := tag.session
	r.Session, r.Turn, r.InputTokens = &s, tag.turn, tag.input
}

// turnFunc sends one turn and returns its record, or false when the wave
// had no request left for it (a sustained wave's bound): the turn was not
// sent. intended is when the turn was meant to go, after the release.
type turnFunc func(tag turnTag, prompt int, p *stream.Prepared, intended time.Duration) (contract.Record, bool)

// newSessionRunner returns the runner of l's sessions against t, or nil
// when l has none.
func (d *Driver) newSessionRunner(t Target, l plan.Load) (*sessionRunner, error) {
	if len(l.Sessions) == 0 {
		return nil, nil
	}
	urls := []string{t.BaseURL}
	if len(t.Replicas) > 1 {
		urls = t.Replicas
	}
	sr := &sessionRunner{d: d, l: l, balance: t.Balance, byClient: map[int][]contract.Record{}, underway: make([]int, len(urls))}
	for _, u := range urls {
		tmpl, err := stream.NewTemplate(t.request(l, u, t.Model))
		if err != nil {
			return nil, err
		}
		sr.tmpls = append(sr.tmpls, tmpl)
	}
	return sr, nil
}

// replica picks the replica session s goes to (-1: a single address) and
// counts it under way until its end (leave).
func (sr *sessionRunner) replica(s int) int {
	n := len(sr.tmpls)
	if n < 2 {
		return -1
	}
	sr.mu.Lock()
	defer sr.mu.Unlock()
	r := s % n
	if sr.balance == BalanceLeastOutstanding {
		r = leastLoaded(sr.underway)
	}
	sr.underway[r]++
	return r
}

// leave ends a session's time under way on replica r.
func (sr *sessionRunner) leave(r int) {
	if r < 0 {
		return
	}
	sr.mu.Lock()
	sr.underway[r]--
	sr.mu.Unlock()
}

// session is the session index that run (the run-th session a wave
// starts) goes through.
func (sr *sessionRunner) session(run int) int {
	return workload.PromptIndex(run, len(sr.l.Sessions))
}

// turns is how many turns the sessions of the given runs have.
func (sr *sessionRunner) turns(runs []int) int {
	n := 0
	for _, run := range runs {
		n += len(sr.l.Sessions[sr.session(run)].Turns)
	}
	return n
}

// run goes through the session of the given run, turn by turn, each sent
// by send. It returns false when send had no request left (the client's
// work is over), true when the session ended (all its turns, a failed
// turn, or ctx canceled).
func (sr *sessionRunner) run(ctx context.Context, run int, send turnFunc) bool {
	s := sr.session(run)
	l := sr.l
	counted := l.InputTokens != nil
	// The replica is chosen at the first turn, before it is built, and
	// kept for every later one.
	rep := sr.replica(s)
	defer sr.leave(rep)
	tmpl := sr.tmpls[max(rep, 0)]
	var (
		msgs     []byte // the history's messages, encoded
		history  int    // its tokens
		intended time.Duration
	)
	for t, prompt := range l.Sessions[s].Turns {
		turn := t + 1
		if think := l.Think.Draw(run, turn); think > 0 && !sleepCtx(ctx, think) {
			return true
		}
		if ctx.Err() != nil {
			return true
		}
		if ms := l.MessagesFor(prompt); ms != nil {
			for _, m := range ms {
				msgs = stream.AppendMessage(msgs, m)
			}
		} else {
			msgs = stream.AppendMessage(msgs, stream.Message{Role: "user", Content: l.Prompts[prompt]})
		}
		tag := turnTag{session: s, turn: turn, replica: replicaTag(rep)}
		if counted {
			history += l.InputTokens[prompt]
			n := history
			tag.input = &n
		}
		r, sent := send(tag, prompt, tmpl.Prepare(msgs, l.MaxTokensFor(prompt)), intended)
		if !sent {
			return false
		}
		if !r.OK {
			return true
		}
		msgs = stream.AppendMessage(msgs, stream.Message{Role: "assistant", Content: r.Text})
		if counted && sr.d.opts.Counter != nil {
			history += r.OutputTokens
		} else {
			counted = false
		}
		intended = time.Duration(math.Round(r.EndS*float64(time.Second))) + l.Think.Draw(run, turn+1)
	}
	return true
}

// settle records a turn of a closed or open-loop wave, sent by client,
// once the wave is released, and keeps it with the client's records.
func (sr *sessionRunner) settle(rel *release, client, prompt int, intended time.Duration, res stream.Result, total int, tl *tally, tag turnTag) contract.Record {
	<-rel.done
	if rel.dropped {
		return contract.Record{}
	}
	r := sr.d.record(rel.wave, rel.at, client, prompt, intended, res)
	rel.scrub(&r)
	rel.stamp(&r)
	tag.apply(&r)
	sr.mu.Lock()
	sr.byClient[client] = append(sr.byClient[client], r)
	sr.mu.Unlock()
	sr.d.ended(rel.wave, rel.at, total, tl, r)
	return r
}

// records returns the turns recorded by settle, by client, each client's
// in the order it sent them.
func (sr *sessionRunner) records() []contract.Record {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	clients := make([]int, 0, len(sr.byClient))
	for c := range sr.byClient {
		clients = append(clients, c)
	}
	sort.Ints(clients)
	out := []contract.Record{}
	for _, c := range clients {
		out = append(out, sr.byClient[c]...)
	}
	return out
}

// sleepCtx waits d, or until ctx is canceled (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// sendables is what a closed or open wave of n clients (or arrivals), of
// which this share runs units, sends: with sessions, their runner and the
// turns of the units' sessions; without, the prepared requests of its
// prompts (for all n, so unit k sends the prompt it sends in the whole
// plan) and len(units).
func (d *Driver) sendables(t Target, l plan.Load, n int, units []int) (*sessionRunner, *replicaSet, int, error) {
	ss, err := d.newSessionRunner(t, l)
	switch {
	case err != nil:
		return nil, nil, 0, err
	case ss != nil:
		return ss, nil, ss.turns(units), nil
	}
	prepared, err := d.prepareReplicas(t, l, n)
	return nil, prepared, len(units), err
}
