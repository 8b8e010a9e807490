package coordinate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Paths the coordinator serves.
const (
	TimePath    = "/v1/time"
	BarrierPath = "/v1/barrier"
	DonePath    = "/v1/done"
)

// Server is the coordinator of Workers workers.
type Server struct {
	// Workers is how many workers take part (N of every segment i/N).
	Workers int
	// StartAt, when set, is the release of the first wave (unless every
	// worker reached it later than StartAt less Margin).
	StartAt time.Time
	// Margin is how long after the last worker reached a barrier its wave
	// is released, so every worker hears the instant before it comes.
	Margin time.Duration
	// Timeout bounds how long a worker waits at a barrier for the others:
	// a worker that died makes the wait end with an error naming who is
	// missing.
	Timeout time.Duration

	// now is the coordinator's clock (nil: time.Now); tests set it.
	now func() time.Time

	once     sync.Once
	mu       sync.Mutex
	barriers map[int]*barrier
	digest   string
	done     map[int]bool
	allDone  chan struct{}
	// gone holds why a worker will never come (it exited); wake is closed
	// (and replaced) whenever done or gone changes, so waiting barriers
	// look again.
	gone map[int]string
	wake chan struct{}
	// latest is the latest wave each worker reached the barrier of.
	latest map[int]int
}

type barrier struct {
	arrived map[int]time.Time
	release time.Time
	// startAt is the latest start_at the workers asked for (wave 0).
	startAt time.Time
	ready   chan struct{}
}

func (s *Server) init() {
	s.once.Do(func() {
		s.barriers = map[int]*barrier{}
		s.done = map[int]bool{}
		s.allDone = make(chan struct{})
		s.gone = map[int]string{}
		s.latest = map[int]int{}
		s.wake = make(chan struct{})
		if s.now == nil {
			s.now = time.Now
		}
	})
}

// Done is closed once every worker reported that it is done.
func (s *Server) Done() <-chan struct{} {
	s.init()
	return s.allDone
}

// TimeReply is the coordinator's clock.
type TimeReply struct {
	UnixNano int64 `json:"unix_nano"`
}

// BarrierRequest is a worker ready for its wave Wave (counted from 0 over
// the waves it walks).
type BarrierRequest struct {
	Worker int    `json:"worker"`
	Count  int    `json:"count"`
	Wave   int    `json:"wave"`
	Digest string `json:"plan_digest"`
	// StartAt, when set on wave 0, asks for the first release at this
	// instant (RFC 3339) at the earliest (a worker's --start-at).
	StartAt string `json:"start_at,omitempty"`
}

// BarrierReply is the wave's release on the coordinator's clock.
type BarrierReply struct {
	ReleaseAt string `json:"release_at"`
	UnixNano  int64  `json:"unix_nano"`
}

// DoneRequest is a worker that has walked its plan (or stopped).
type DoneRequest struct {
	Worker int `json:"worker"`
}

type errorReply struct {
	Error string `json:"error"`
}

// ServeHTTP serves the time, the barriers and the done reports.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.init()
	switch r.URL.Path {
	case TimePath:
		reply(w, http.StatusOK, TimeReply{UnixNano: s.now().UnixNano()})
	case BarrierPath:
		s.serveBarrier(w, r)
	case DonePath:
		var req DoneRequest
		if !decode(w, r, &req) {
			return
		}
		if req.Worker < 0 || req.Worker >= s.Workers {
			reply(w, http.StatusConflict, errorReply{fmt.Sprintf("worker %d: this coordinator has workers 0 to %d", req.Worker, s.Workers-1)})
			return
		}
		s.mu.Lock()
		s.done[req.Worker] = true
		s.wakeLocked()
		if len(s.done) == s.Workers {
			select {
			case <-s.allDone:
			default:
				close(s.allDone)
			}
		}
		s.mu.Unlock()
		reply(w, http.StatusOK, struct{}{})
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) serveBarrier(w http.ResponseWriter, r *http.Request) {
	var req BarrierRequest
	if !decode(w, r, &req) {
		return
	}
	arrived := s.now()
	s.mu.Lock()
	switch {
	case req.Count != s.Workers:
		s.mu.Unlock()
		reply(w, http.StatusConflict, errorReply{fmt.Sprintf("worker %d counts %d workers; this coordinator serves %d", req.Worker, req.Count, s.Workers)})
		return
	case req.Worker < 0 || req.Worker >= s.Workers:
		s.mu.Unlock()
		reply(w, http.StatusConflict, errorReply{fmt.Sprintf("worker %d: this coordinator has workers 0 to %d", req.Worker, s.Workers-1)})
		return
	case s.digest != "" && req.Digest != s.digest:
		s.mu.Unlock()
		reply(w, http.StatusConflict, errorReply{fmt.Sprintf("worker %d runs plan %s, the others plan %s: the segments are of different plans", req.Worker, short(req.Digest), short(s.digest))})
		return
	}
	s.digest = req.Digest
	b := s.barriers[req.Wave]
	if b == nil {
		b = &barrier{arrived: map[int]time.Time{}, ready: make(chan struct{})}
		s.barriers[req.Wave] = b
	}
	if _, dup := b.arrived[req.Worker]; dup {
		s.mu.Unlock()
		reply(w, http.StatusConflict, errorReply{fmt.Sprintf("worker %d reached the barrier of wave %d twice: two workers run segment %d/%d", req.Worker, req.Wave, req.Worker, s.Workers)})
		return
	}
	if req.StartAt != "" {
		at, err := time.Parse(time.RFC3339Nano, req.StartAt)
		if err != nil {
			s.mu.Unlock()
			reply(w, http.StatusBadRequest, errorReply{fmt.Sprintf("worker %d: start_at %q: %v", req.Worker, req.StartAt, err)})
			return
		}
		if req.Wave == 0 && at.After(b.startAt) {
			b.startAt = at
		}
	}
	b.arrived[req.Worker] = arrived
	if l, ok := s.latest[req.Worker]; !ok || req.Wave > l {
		s.latest[req.Worker] = req.Wave
		s.wakeLocked()
	}
	if len(b.arrived) == s.Workers {
		last := time.Time{}
		for _, t := range b.arrived {
			if t.After(last) {
				last = t
			}
		}
		b.release = last.Add(s.Margin)
		if req.Wave == 0 && b.release.Before(s.StartAt) {
			b.release = s.StartAt
		}
		if b.release.Before(b.startAt) {
			b.release = b.startAt
		}
		close(b.ready)
	}
	s.mu.Unlock()

	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	code, v := s.wait(r, b, req.Wave, timeout)
	if code != 0 {
		reply(w, code, v)
	}
}

// wait holds a worker at barrier b until every worker reached it (the
// release), a missing worker will never come (done or gone), the timeout
// passes, or the worker hangs up (code 0: no reply).
func (s *Server) wait(r *http.Request, b *barrier, wave int, timeout time.Duration) (int, any) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		s.mu.Lock()
		wake := s.wake
		why := s.absentLocked(b, wave)
		s.mu.Unlock()
		select {
		case <-b.ready:
			return http.StatusOK, BarrierReply{ReleaseAt: b.release.UTC().Format(time.RFC3339Nano), UnixNano: b.release.UnixNano()}
		default:
		}
		if why != "" {
			return http.StatusServiceUnavailable, errorReply{fmt.Sprintf("wave %d: %s, so its barrier will not be reached", wave, why)}
		}
		select {
		case <-wake:
		case <-b.ready:
		case <-r.Context().Done():
			return 0, nil
		case <-t.C:
			s.mu.Lock()
			var missing []string
			for i := range s.Workers {
				if _, ok := b.arrived[i]; !ok {
					missing = append(missing, strconv.Itoa(i))
				}
			}
			n := len(b.arrived)
			s.mu.Unlock()
			return http.StatusGatewayTimeout, errorReply{fmt.Sprintf("wave %d: %d of %d workers reached its barrier within %v (missing: %s): a worker died or is stuck",
				wave, n, s.Workers, timeout, strings.Join(missing, ", "))}
		}
	}
}

// absentLocked says why a worker barrier b of wave still waits for will
// never reach it: it reported done (it has no such wave), exited, or is
// already at a later wave (it skipped this one: its server was not
// ready); "" while every missing worker may still come.
func (s *Server) absentLocked(b *barrier, wave int) string {
	for i := range s.Workers {
		if _, ok := b.arrived[i]; ok {
			continue
		}
		if l, ok := s.latest[i]; ok && l > wave {
			return fmt.Sprintf("worker %d skipped it (it waits at wave %d)", i, l)
		}
		if why, ok := s.gone[i]; ok {
			return fmt.Sprintf("worker %d is gone (%s)", i, why)
		}
		if s.done[i] {
			return fmt.Sprintf("worker %d reported done without reaching it", i)
		}
	}
	return ""
}

func (s *Server) wakeLocked() {
	close(s.wake)
	s.wake = make(chan struct{})
}

// Gone tells the coordinator that worker i exited (why): barriers waiting
// for it fail at once instead of at their timeout.
func (s *Server) Gone(i int, why string) {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done[i] {
		s.gone[i] = why
		s.wakeLocked()
	}
}

// Arrived is how many workers reached the barrier of wave w so far.
func (s *Server) Arrived(w int) []int {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	if b := s.barriers[w]; b != nil {
		for i := range b.arrived {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// Digest is the plan digest of the workers so far ("" before the first).
func (s *Server) Digest() string {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.digest
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.Method != http.MethodPost {
		reply(w, http.StatusMethodNotAllowed, errorReply{"POST only"})
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		reply(w, http.StatusBadRequest, errorReply{"bad request: " + err.Error()})
		return false
	}
	return true
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
