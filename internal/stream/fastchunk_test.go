package stream

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

var chunkSamples = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"Qwen/Qwen2.5-1.5B-Instruct","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{},"finish_reason":"length","stop_reason":null}],"usage":null}`,
	`{"choices":[],"usage":{"prompt_tokens":11,"completion_tokens":128,"total_tokens":139,"prompt_tokens_details":null}}`,
	`{"choices":[{"delta":{"content":"line\nbreak \"quoted\" \u00e9\ud83d\ude00"}}]}`,
	`{"choices":[{"delta":{"content":"héllo 世界"}}]}`,
	`{"choices":[{"text":"legacy","finish_reason":null}]}`,
	completionsChunk,
	`{"error":{"message":"engine died","type":"internal","code":500}}`,
	`{"object":"error","message":"x","error":null}`,
	` { "choices" : [ { "delta" : { "content" : "a" } } , { "delta" : null } ] } `,
	`{"Choices":[{"delta":{"content":"folded"}}]}`,
	`{"choices":[{"delta":{"content":"a"}}],"choices":[]}`,
	`{"choices":[null]}`,
	`{"usage":{"completion_tokens":1.0}}`,
	`{"usage":{"completion_tokens":-0,"prompt_tokens":99999999999999999999}}`,
	`{"choices":[{"delta":{"content":"bad` + "\xff" + `"}}]}`,
	`{"choices":[{"delta":{"content":7}}]}`,
	`{"x":[1,-2.5e+3,true,false,null,{"y":[]}],"choices":[]}`,
	`{"choices":[]} trailing`,
	`[1,2]`,
	`null`,
	`{"choices":[{"delta":{"content":"a"}},]}`,
	`{"choices":[{"index":0,"delta":{"reasoning":" think"},"logprobs":null,"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning_content":" think","reasoning":" think"}}]}`,
	`{"choices":[{"delta":{"content":"a","tool_calls":[],"reasoning":null}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"x\":"}}]}}]}`,
	`{"choices":[{"delta":{"Reasoning":"folded"}}]}`,
	`{"choices":[{"delta":{"reasoning":" a","reasoning":" b"}}]}`,
	`{"choices":[{"delta":{"reasoning":7}}]}`,
	`{"choices":[{"delta":{"tool_calls":{"function":{}}}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":{"x":1}}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[null,{"function":null},{"function":{"arguments":null}}]}}]}`,
	stampedChunk,
	`{"rehearse_sent_ns":9223372036854775807,"choices":[]}`,
	`{"rehearse_sent_ns":9223372036854775808,"choices":[]}`,
	`{"rehearse_sent_ns":-9223372036854775808,"choices":[]}`,
	`{"rehearse_sent_ns":-9223372036854775809,"choices":[]}`,
	`{"rehearse_sent_ns":-0,"choices":[]}`,
	`{"rehearse_sent_ns":null,"choices":[]}`,
	`{"rehearse_sent_ns":1.5,"choices":[]}`,
	`{"rehearse_sent_ns":"1","choices":[]}`,
	`{"rehearse_sent_ns":1,"rehearse_sent_ns":2}`,
	`{"Rehearse_Sent_NS":1}`,
	`{"rehearse_sent_ns":012}`,
}

// stampedChunk is a content chunk of rehearse sim --stamp-sends.
const stampedChunk = `{"rehearse_sent_ns":1764614400123456789,"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"Qwen/Qwen2.5-1.5B-Instruct","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}`

// completionsChunk is a /v1/completions stream's content chunk, as vLLM
// (and the simulator) write it.
const completionsChunk = `{"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"Qwen/Qwen2.5-1.5B-Instruct","choices":[{"index":0,"text":" token","logprobs":null,"finish_reason":null,"stop_reason":null}]}`

func TestParseChunkFastAgrees(t *testing.T) {
	fast := 0
	for _, s := range chunkSamples {
		if checkFastChunk(t, []byte(s)) {
			fast++
		}
	}
	if fast < 10 {
		t.Fatalf("the fast path took only %d of %d samples", fast, len(chunkSamples))
	}
	var c chunk
	if !parseChunkFast([]byte(chunkSamples[0]), &c) || *c.Choices[0].Delta.Content != " token" {
		t.Fatal("the fast path refused the commonest chunk")
	}
	if !parseChunkFast([]byte(completionsChunk), &c) || *c.Choices[0].Text != " token" {
		t.Fatal("the fast path refused a completions chunk")
	}
}

// parseChunkFast parses data as a stream's state.handle does: through
// parseChunkInto, with an arena of the stream's size.
func parseChunkFast(data []byte, c *chunk) bool {
	arena := make([]string, 0, 8)
	return parseChunkInto(data, c, &arena)
}

// checkFastChunk fails the test when the fast path accepts data and
// disagrees with encoding/json, or accepts what encoding/json rejects.
func checkFastChunk(t *testing.T, data []byte) bool {
	t.Helper()
	var fast chunk
	if !parseChunkFast(data, &fast) {
		return false
	}
	var slow chunk
	if err := json.Unmarshal(data, &slow); err != nil {
		t.Fatalf("fast path accepted %q, encoding/json says %v", data, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q:\nfast %s\nslow %s", data, show(fast), show(slow))
	}
	return true
}

func show(c chunk) string {
	b, _ := json.Marshal(c)
	return string(b)
}

func FuzzParseChunkFast(f *testing.F) {
	for _, s := range chunkSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkFastChunk(t, data) })
}

// BenchmarkChunkDecode compares the fast path with encoding/json on the
// commonest chunk.
func BenchmarkChunkDecode(b *testing.B) {
	data := []byte(chunkSamples[0])
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			var c chunk
			if !parseChunkFast(data, &c) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("stream", func(b *testing.B) {
		// As a stream reads it: one state for all its events.
		var (
			st   state
			res  Result
			text strings.Builder
		)
		ev, now := Event{Data: data}, time.Now()
		for b.Loop() {
			st.handle(ev, now, &res, &text)
			if len(res.ChunkTimes) > 4096 {
				res.ChunkTimes = res.ChunkTimes[:0]
				text.Reset()
			}
		}
	})
	b.Run("stream-stamped", func(b *testing.B) {
		// A --stamp-sends chunk: the stamp is read and its delta kept.
		var (
			st   state
			res  Result
			text strings.Builder
		)
		ev, now := Event{Data: []byte(stampedChunk)}, time.Now()
		for b.Loop() {
			st.handle(ev, now, &res, &text)
			if len(res.ChunkTimes) > 4096 {
				res.ChunkTimes, res.AddedNS = res.ChunkTimes[:0], res.AddedNS[:0]
				text.Reset()
			}
		}
		if st.fail != "" || len(res.AddedNS) == 0 {
			b.Fatal("the stamp was not read")
		}
	})
	b.Run("fast-completions", func(b *testing.B) {
		// The completions API's content chunk takes the same path.
		data := []byte(completionsChunk)
		for b.Loop() {
			var c chunk
			if !parseChunkFast(data, &c) {
				b.Fatal("refused")
			}
		}
	})
	// A reasoning model's commonest chunk, read as a stream reads it.
	reasoning := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"reasoning":" token"},"logprobs":null,"finish_reason":null}]}`)
	b.Run("stream-reasoning", func(b *testing.B) {
		var (
			st   state
			res  Result
			text strings.Builder
		)
		ev, now := Event{Data: reasoning}, time.Now()
		for b.Loop() {
			st.handle(ev, now, &res, &text)
			if st.reasoning.Len() > 64<<10 {
				st.reasoning.Reset()
			}
		}
		if st.fail != "" || !parseChunkFast(reasoning, &chunk{}) {
			b.Fatal("the reasoning chunk left the fast path")
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var c chunk
			if err := json.Unmarshal(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A stream reuses one chunk for all its events, so that reading a content
// chunk costs only its content (string and pointer), not a new chunk and
// choices list each time.
func TestHandleReusesChunk(t *testing.T) {
	ev := Event{Data: []byte(chunkSamples[0])}
	var (
		st   state
		res  Result
		text strings.Builder
	)
	now := time.Now()
	res.ChunkTimes = make([]time.Time, 0, 1024)
	text.Grow(64 << 10)
	st.handle(ev, now, &res, &text)
	allocs := testing.AllocsPerRun(100, func() { st.handle(ev, now, &res, &text) })
	if st.fail != "" || len(res.ChunkTimes) != 102 {
		t.Fatalf("%s %s, %d chunks", st.fail, st.failMsg, len(res.ChunkTimes))
	}
	if allocs > 2 {
		t.Fatalf("%v allocations per content chunk, want at most 2", allocs)
	}
}

// A stamped chunk costs no allocation more than a plain one, and its
// delta is the client's stamp minus the server's.
func TestHandleStampedChunk(t *testing.T) {
	ev := Event{Data: []byte(stampedChunk)}
	var (
		st   state
		res  Result
		text strings.Builder
	)
	now := time.Unix(0, 1764614400123456789+1500)
	res.ChunkTimes = make([]time.Time, 0, 1024)
	res.AddedNS = make([]int64, 0, 1024)
	text.Grow(64 << 10)
	st.handle(ev, now, &res, &text)
	if st.fail != "" || len(res.AddedNS) != 1 || res.AddedNS[0] != 1500 {
		t.Fatalf("%s %s, added %v", st.fail, st.failMsg, res.AddedNS)
	}
	allocs := testing.AllocsPerRun(100, func() { st.handle(ev, now, &res, &text) })
	if allocs > 2 {
		t.Fatalf("%v allocations per stamped content chunk, want at most 2", allocs)
	}
	// A chunk without the stamp adds no delta.
	st.handle(Event{Data: []byte(chunkSamples[0])}, now, &res, &text)
	if len(res.AddedNS) != 102 {
		t.Fatalf("%d deltas after an unstamped chunk, want 102", len(res.AddedNS))
	}
}
