package contract

import (
	"reflect"
	"testing"
)

// streamed is a successful request of a mechanism-check wave sent at
// start, streaming tokens chunks evenly from first to end (the last one
// at end − 0.01).
func streamed(client int, start, first, end float64, tokens int) Record {
	f := first
	chunks := make([]float64, tokens)
	for i := range chunks {
		chunks[i] = first + (end-0.01-first)*float64(i)/float64(max(1, tokens-1))
	}
	return Record{Kind: KindMechanismCheck, Server: "s", Concurrency: 3, Repeat: 1, Client: client,
		StartS: start, FirstContentS: &f, ChunkTimesS: chunks, EndS: end, OutputTokens: tokens, OK: true}
}

func f64(v float64) *float64 { return &v }

// A serial server streams one request at a time, whatever the clients in
// flight; a batching one streams them together, and its tokens arrive
// while several stream.
func TestClientConcurrency(t *testing.T) {
	serial := ClientConcurrencyOf([]Record{
		streamed(0, 0, 0.1, 1, 10),
		streamed(1, 0, 1.1, 2, 10),
		streamed(2, 0, 2.1, 3, 10),
	})
	want := ClientConcurrency{
		InFlightMax: 3, StreamingMax: 1,
		InFlight:    [][2]float64{{0, 3}, {1, 2}, {2, 1}, {3, 0}},
		Streaming:   [][2]float64{{0.1, 1}, {1, 0}, {1.1, 1}, {2, 0}, {2.1, 1}, {3, 0}},
		ByStreaming: []StreamingLevel{{Streaming: 1, DurationS: 0.9 * 3, OutputTokens: 30, TokS: f64(30 / 2.7)}},
	}
	checkConcurrency(t, "serial", serial, want)

	batching := ClientConcurrencyOf([]Record{
		streamed(0, 0, 0.2, 1.5, 10),
		streamed(1, 0, 0.2, 1.5, 10),
		streamed(2, 0, 0.3, 1.6, 10),
	})
	want = ClientConcurrency{
		InFlightMax: 3, StreamingMax: 3,
		InFlight:  [][2]float64{{0, 3}, {1.5, 1}, {1.6, 0}},
		Streaming: [][2]float64{{0.2, 2}, {0.3, 3}, {1.5, 1}, {1.6, 0}},
		ByStreaming: []StreamingLevel{
			{Streaming: 1, DurationS: 0.1, OutputTokens: 1, TokS: f64(10)},
			{Streaming: 2, DurationS: 0.1, OutputTokens: 2, TokS: f64(20)},
			{Streaming: 3, DurationS: 1.2, OutputTokens: 27, TokS: f64(27 / 1.2)},
		},
	}
	checkConcurrency(t, "batching", batching, want)
}

// A failed request is in flight and, once it had content, streaming; its
// tokens are not counted. A request with no content is in flight only.
func TestClientConcurrencyFailures(t *testing.T) {
	cut := streamed(1, 0, 0.5, 1, 4)
	cut.OK, cut.ErrorKind = false, ErrStreamTruncated
	none := Record{Kind: KindMechanismCheck, StartS: 0, EndS: 2, OK: false, ErrorKind: ErrTimeout, ChunkTimesS: []float64{}}
	got := ClientConcurrencyOf([]Record{streamed(0, 0, 0.5, 1, 4), cut, none})
	want := ClientConcurrency{
		InFlightMax: 3, StreamingMax: 2,
		InFlight:    [][2]float64{{0, 3}, {1, 1}, {2, 0}},
		Streaming:   [][2]float64{{0.5, 2}, {1, 0}},
		ByStreaming: []StreamingLevel{{Streaming: 2, DurationS: 0.5, OutputTokens: 4, TokS: f64(8)}},
	}
	checkConcurrency(t, "failures", got, want)

	empty := ClientConcurrencyOf(nil)
	if empty.InFlightMax != 0 || empty.StreamingMax != 0 || len(empty.ByStreaming) != 0 || empty.InFlight == nil || empty.ByStreaming == nil {
		t.Errorf("no records: %+v", empty)
	}
}

func checkConcurrency(t *testing.T, name string, got, want ClientConcurrency) {
	t.Helper()
	for i := range got.ByStreaming {
		g := &got.ByStreaming[i]
		if i < len(want.ByStreaming) {
			w := want.ByStreaming[i]
			if g.TokS != nil && w.TokS != nil && approx(*g.TokS, *w.TokS) {
				g.TokS = w.TokS
			}
			if approx(g.DurationS, w.DurationS) {
				g.DurationS = w.DurationS
			}
			if approx(g.OutputTokens, w.OutputTokens) {
				g.OutputTokens = w.OutputTokens
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %+v\n want %+v", name, got, want)
	}
}

func approx(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }
