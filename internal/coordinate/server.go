package coordinate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
	// Token, when set, is the shared secret (TokenEnv) every request must
	// carry as "Authorization: Bearer TOKEN"; any other is refused with
	// 401 before it is read. "" serves anyone (loopback only: NeedsToken).
	Token string
	// ReadHeaderTimeout, BodyTimeout and IdleTimeout bound how long a
	// connection may take to send a request's header, then its body, and
	// how long it may stay idle between requests (0: the Default ones).
	ReadHeaderTimeout, BodyTimeout, IdleTimeout time.Duration
	// MaxConns bounds the connections Serve serves at once (0:
	// DefaultConnsBase plus two per worker).
	MaxConns int

	// now is the coordinator's clock (nil: time.Now); tests set it.
	now func() time.Time

	once     sync.Once
	mu       sync.Mutex
	http     *http.Server
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

// ServeHTTP serves the time, the barriers and the done reports. Every
// request is checked (token, method, body size and deadline, JSON, the
// fields against this coordinator) before it changes anything.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.init()
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="rehearse coordinate"`)
		reply(w, http.StatusUnauthorized, errorReply{"unauthorized: this coordinator needs its token (" + TokenEnv + ")"})
		return
	}
	switch r.URL.Path {
	case TimePath:
		if r.Method != http.MethodGet {
			reply(w, http.StatusMethodNotAllowed, errorReply{"GET only"})
			return
		}
		reply(w, http.StatusOK, TimeReply{UnixNano: s.now().UnixNano()})
	case BarrierPath:
		s.serveBarrier(w, r)
	case DonePath:
		s.serveDone(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) serveDone(w http.ResponseWriter, r *http.Request) {
	var req DoneRequest
	if !s.decode(w, r, &req) {
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
}

// checkBarrier checks a barrier request against this coordinator alone
// (nothing of the other workers'), and parses its start_at.
func (s *Server) checkBarrier(req BarrierRequest) (time.Time, int, string) {
	switch {
	case req.Count != s.Workers:
		return time.Time{}, http.StatusConflict, fmt.Sprintf("worker %d counts %d workers; this coordinator serves %d", req.Worker, req.Count, s.Workers)
	case req.Worker < 0 || req.Worker >= s.Workers:
		return time.Time{}, http.StatusConflict, fmt.Sprintf("worker %d: this coordinator has workers 0 to %d", req.Worker, s.Workers-1)
	case req.Wave < 0:
		return time.Time{}, http.StatusBadRequest, fmt.Sprintf("worker %d: wave %d: want 0 or more", req.Worker, req.Wave)
	case req.Digest == "":
		return time.Time{}, http.StatusBadRequest, fmt.Sprintf("worker %d: no plan_digest", req.Worker)
	}
	if req.StartAt == "" {
		return time.Time{}, 0, ""
	}
	at, err := time.Parse(time.RFC3339Nano, req.StartAt)
	if err != nil {
		return time.Time{}, http.StatusBadRequest, fmt.Sprintf("worker %d: start_at %q: %v", req.Worker, req.StartAt, err)
	}
	return at, 0, ""
}

func (s *Server) serveBarrier(w http.ResponseWriter, r *http.Request) {
	var req BarrierRequest
	if !s.decode(w, r, &req) {
		return
	}
	startAt, code, msg := s.checkBarrier(req)
	if code != 0 {
		reply(w, code, errorReply{msg})
		return
	}
	b, code, msg := s.arrive(req, startAt)
	if code != 0 {
		reply(w, code, errorReply{msg})
		return
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	code, v := s.wait(r, b, req.Wave, timeout)
	if code == 0 {
		s.withdraw(b, req.Worker)
		return
	}
	reply(w, code, v)
}

// arrive records worker req.Worker at the barrier of req.Wave, unless it
// runs another plan or is there already (its arrival's request is still
// open); the last to arrive sets the release.
func (s *Server) arrive(req BarrierRequest, startAt time.Time) (*barrier, int, string) {
	arrived := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.digest != "" && req.Digest != s.digest {
		return nil, http.StatusConflict, fmt.Sprintf("worker %d runs plan %s, the others plan %s: the segments are of different plans", req.Worker, short(req.Digest), short(s.digest))
	}
	b := s.barriers[req.Wave]
	if b == nil {
		b = &barrier{arrived: map[int]time.Time{}, ready: make(chan struct{})}
		s.barriers[req.Wave] = b
	}
	if _, dup := b.arrived[req.Worker]; dup {
		return nil, http.StatusConflict, fmt.Sprintf("worker %d reached the barrier of wave %d twice: two workers run segment %d/%d", req.Worker, req.Wave, req.Worker, s.Workers)
	}
	s.digest = req.Digest
	if req.Wave == 0 && startAt.After(b.startAt) {
		b.startAt = startAt
	}
	b.arrived[req.Worker] = arrived
	if l, ok := s.latest[req.Worker]; !ok || req.Wave > l {
		s.latest[req.Worker] = req.Wave
		s.wakeLocked()
	}
	if len(b.arrived) == s.Workers {
		s.releaseLocked(b, req.Wave)
	}
	return b, 0, ""
}

// releaseLocked sets barrier b's release: the last arrival plus Margin,
// the first wave not before StartAt or a worker's start_at.
func (s *Server) releaseLocked(b *barrier, wave int) {
	last := time.Time{}
	for _, t := range b.arrived {
		if t.After(last) {
			last = t
		}
	}
	b.release = last.Add(s.Margin)
	if wave == 0 && b.release.Before(s.StartAt) {
		b.release = s.StartAt
	}
	if b.release.Before(b.startAt) {
		b.release = b.startAt
	}
	close(b.ready)
}

// withdraw takes back worker i's arrival at barrier b when its request
// ended (its connection closed: the worker died or gave up) before the
// release: a wave is released only to workers that are still waiting,
// and the worker's restart may arrive again.
func (s *Server) withdraw(b *barrier, i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-b.ready:
	default:
		delete(b.arrived, i)
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
			return http.StatusGatewayTimeout, s.timedOut(b, wave, timeout)
		}
	}
}

func (s *Server) timedOut(b *barrier, wave int, timeout time.Duration) errorReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	var missing []string
	for i := range s.Workers {
		if _, ok := b.arrived[i]; !ok {
			missing = append(missing, strconv.Itoa(i))
		}
	}
	return errorReply{fmt.Sprintf("wave %d: %d of %d workers reached its barrier within %v (missing: %s): a worker died or is stuck",
		wave, len(b.arrived), s.Workers, timeout, strings.Join(missing, ", "))}
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

// maxBody is the largest request body the coordinator reads.
const maxBody = 1 << 16

// decode reads a POST's JSON body, whole (so a hang-up is seen as the
// request's end) and within BodyTimeout, strictly into v.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.Method != http.MethodPost {
		reply(w, http.StatusMethodNotAllowed, errorReply{"POST only"})
		return false
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(orDefault(s.BodyTimeout, DefaultBodyTimeout)))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		// The deadline stays: the server's drain of the rest of the body
		// ends at once, and the connection is closed.
		w.Header().Set("Connection", "close")
		reply(w, http.StatusBadRequest, errorReply{"bad request: body: " + err.Error()})
		return false
	}
	// The wait at a barrier that follows has no read deadline.
	_ = rc.SetReadDeadline(time.Time{})
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		reply(w, http.StatusBadRequest, errorReply{"bad request: " + err.Error()})
		return false
	}
	if dec.More() {
		reply(w, http.StatusBadRequest, errorReply{"bad request: more than one JSON value"})
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
