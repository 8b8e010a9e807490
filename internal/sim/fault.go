package sim

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// FaultKind names one way a response goes wrong.
type FaultKind string

// Fault kinds, for the reliability tests of the client.
const (
	// FaultErrorEvent sends an in-band {"error": ...} event mid-stream, then
	// [DONE]; a non-streaming response becomes HTTP 500.
	FaultErrorEvent FaultKind = "error_event"
	// FaultTruncate ends the stream mid-way without finish_reason or [DONE];
	// a non-streaming body is cut off mid-JSON.
	FaultTruncate FaultKind = "truncate"
	// FaultHTTP500 answers 500 with a JSON error before any content.
	FaultHTTP500 FaultKind = "http500"
	// FaultHTTP429 answers 429 (Retry-After: 1) with a JSON error.
	FaultHTTP429 FaultKind = "http429"
	// FaultStall stops sending after the first content and holds the
	// connection open until the client gives up or the server stops; the
	// sequence leaves the engine, so a stalled stream holds no engine slot.
	FaultStall FaultKind = "stall"
	// FaultMalformed sends one chunk of invalid JSON mid-stream, then carries
	// on; a non-streaming body is invalid JSON.
	FaultMalformed FaultKind = "malformed"
	// FaultCrash calls the server's crash hook mid-stream (rehearse sim exits
	// the process) and drops the connection.
	FaultCrash FaultKind = "crash"
	// FaultOverrun ignores max_tokens: once the engine's output is sent, the
	// stream goes on to OverrunTimes × the request's max_tokens in content
	// chunks, written as fast as the client reads, then finishes (a server
	// that does not honour max_tokens). Non-streaming responses are
	// unaffected.
	FaultOverrun FaultKind = "overrun"
)

// OverrunTimes is how many times its max_tokens FaultOverrun streams:
// twice the client's cut (stream.OverrunFactor), so that the client cuts it.
const OverrunTimes = 8

// FaultKinds lists every fault kind.
var FaultKinds = []FaultKind{FaultErrorEvent, FaultTruncate, FaultHTTP500, FaultHTTP429, FaultStall, FaultMalformed, FaultCrash, FaultOverrun}

// Fault injects one kind of failure into a share of requests.
type Fault struct {
	Kind FaultKind
	// Rate is the probability, per request, that this fault fires.
	Rate float64
}

func (f Fault) String() string { return fmt.Sprintf("%s:%g", f.Kind, f.Rate) }

// ParseFault parses KIND:RATE, for example "http500:0.05".
func ParseFault(s string) (Fault, error) {
	kind, rate, ok := strings.Cut(s, ":")
	if !ok {
		return Fault{}, fmt.Errorf("fault %q: want KIND:RATE (e.g. http500:0.05), KIND one of %s", s, faultKindList())
	}
	f := Fault{Kind: FaultKind(kind)}
	known := false
	for _, k := range FaultKinds {
		if k == f.Kind {
			known = true
		}
	}
	if !known {
		return Fault{}, fmt.Errorf("fault %q: unknown kind %q, want one of %s", s, kind, faultKindList())
	}
	r, err := strconv.ParseFloat(rate, 64)
	if err != nil || !finite(r) || r < 0 || r > 1 {
		return Fault{}, fmt.Errorf("fault %q: rate %q is not a probability in [0, 1]", s, rate)
	}
	f.Rate = r
	return f, nil
}

func faultKindList() string {
	var names []string
	for _, k := range FaultKinds {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// faultPlan is the fault one request suffers, decided when it arrives.
type faultPlan struct {
	kind FaultKind // "" for none
	// atToken is the number of content tokens sent before the fault acts
	// (mid-stream kinds only): at least 1 and below the output length when
	// the output has two tokens or more.
	atToken int
}

// planFault decides request number n's fault from the seed alone: the
// faults are tried in the order given, the first that fires wins.
func planFault(faults []Fault, seed int64, n uint64, outputTokens int) faultPlan {
	if len(faults) == 0 {
		return faultPlan{}
	}
	rng := rand.New(rand.NewPCG(uint64(seed), n))
	for _, f := range faults {
		if rng.Float64() < f.Rate {
			at := 1
			if outputTokens > 2 {
				at = 1 + rng.IntN(outputTokens-1)
			}
			return faultPlan{kind: f.Kind, atToken: at}
		}
	}
	return faultPlan{}
}
