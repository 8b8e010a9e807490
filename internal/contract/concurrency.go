package contract

import (
	"math"
	"sort"
)

// ClientConcurrency is what one wave's own records show of how many
// requests a server worked on at once, read on the client's side alone,
// with no server metric: the mechanism check's evidence where the server
// has no metrics endpoint (ollama), and a second view beside its metric
// where it has one.
//
// A request is in flight from its send to its end, [start_s, end_s), and
// streaming from its first content to its end, [first_content_s, end_s).
// A server that generates for one request at a time streams one at a time
// whatever the clients (the next request's first content follows the last
// one's end); more than one streaming at once means it was generating for
// several together. ByStreaming sets that against throughput: the output
// tokens that arrived while k requests were streaming, over the time k
// were, each successful record's output_tokens spread evenly over its
// content chunks.
type ClientConcurrency struct {
	InFlightMax  int `json:"in_flight_max"`
	StreamingMax int `json:"streaming_max"`
	// InFlight and Streaming are step series, [t_s, count] at each instant
	// the count changed (all of an instant's starts and ends applied),
	// from the wave's release.
	InFlight    [][2]float64     `json:"in_flight"`
	Streaming   [][2]float64     `json:"streaming"`
	ByStreaming []StreamingLevel `json:"by_streaming"`
}

// StreamingLevel is the time during which exactly Streaming requests were
// streaming, and the output tokens that arrived in it.
type StreamingLevel struct {
	Streaming    int     `json:"streaming"`
	DurationS    float64 `json:"duration_s"`
	OutputTokens float64 `json:"output_tokens"`
	// TokS is OutputTokens ÷ DurationS; nil where DurationS is 0.
	TokS *float64 `json:"tok_s"`
}

// ClientConcurrencyOf is the client's view of the concurrency of the wave
// whose records these are (ClientConcurrency); records with a non-finite
// time or an end before their start or first content are left out.
func ClientConcurrencyOf(records []Record) ClientConcurrency {
	var flight, streaming []Span
	type chunk struct{ t, tokens float64 }
	var chunks []chunk
	for i := range records {
		r := &records[i]
		if !finiteTimes(r.StartS, r.EndS) || r.EndS < r.StartS {
			continue
		}
		flight = append(flight, Span{r.StartS, r.EndS})
		if r.FirstContentS == nil || !finiteTimes(*r.FirstContentS) || *r.FirstContentS > r.EndS {
			continue
		}
		streaming = append(streaming, Span{*r.FirstContentS, r.EndS})
		if !r.OK || len(r.ChunkTimesS) == 0 {
			continue
		}
		each := float64(r.OutputTokens) / float64(len(r.ChunkTimesS))
		for _, t := range r.ChunkTimesS {
			if finiteTimes(t) {
				chunks = append(chunks, chunk{t, each})
			}
		}
	}
	c := ClientConcurrency{InFlight: stepSeries(flight), Streaming: stepSeries(streaming)}
	c.InFlightMax = seriesMax(c.InFlight)
	c.StreamingMax = seriesMax(c.Streaming)

	// Each level's time: the steps of the streaming series; each chunk's
	// level: the count at its instant (the steps at or before it applied).
	levels := map[int]*StreamingLevel{}
	level := func(k int) *StreamingLevel {
		if levels[k] == nil {
			levels[k] = &StreamingLevel{Streaming: k}
		}
		return levels[k]
	}
	s := c.Streaming
	for i := 0; i+1 < len(s); i++ {
		if k := int(s[i][1]); k > 0 {
			level(k).DurationS += s[i+1][0] - s[i][0]
		}
	}
	sort.Slice(chunks, func(i, j int) bool { return chunks[i].t < chunks[j].t })
	j := -1
	for _, ch := range chunks {
		for j+1 < len(s) && s[j+1][0] <= ch.t {
			j++
		}
		if j >= 0 && s[j][1] > 0 {
			level(int(s[j][1])).OutputTokens += ch.tokens
		}
	}
	c.ByStreaming = []StreamingLevel{}
	for _, l := range levels {
		if l.DurationS > 0 {
			v := l.OutputTokens / l.DurationS
			l.TokS = &v
		}
		c.ByStreaming = append(c.ByStreaming, *l)
	}
	sort.Slice(c.ByStreaming, func(i, j int) bool { return c.ByStreaming[i].Streaming < c.ByStreaming[j].Streaming })
	return c
}

// stepSeries is the count of spans holding t, [start, end), at each
// instant it changes: every start and end of one instant applied together.
func stepSeries(spans []Span) [][2]float64 {
	type event struct {
		t     float64
		delta int
	}
	events := make([]event, 0, 2*len(spans))
	for _, s := range spans {
		if s.EndS > s.StartS {
			events = append(events, event{s.StartS, 1}, event{s.EndS, -1})
		}
	}
	sort.Slice(events, func(i, j int) bool { return events[i].t < events[j].t })
	out := [][2]float64{}
	n := 0
	for i := 0; i < len(events); {
		t := events[i].t
		before := n
		for ; i < len(events) && events[i].t == t; i++ {
			n += events[i].delta
		}
		if n != before {
			out = append(out, [2]float64{t, float64(n)})
		}
	}
	return out
}

func seriesMax(s [][2]float64) int {
	m := 0
	for _, p := range s {
		m = max(m, int(p[1]))
	}
	return m
}

func finiteTimes(ts ...float64) bool {
	for _, t := range ts {
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return false
		}
	}
	return true
}
