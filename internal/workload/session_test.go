package workload

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const shareGPTMulti = `[
 {"id": "a", "conversations": [{"from": "human", "value": "one"}, {"from": "gpt", "value": "reply one"},
   {"from": "human", "value": "two"}, {"from": "gpt", "value": "reply two"}, {"from": "human", "value": "three"}]},
 {"id": "b", "conversations": [{"from": "gpt", "value": "hi"}, {"from": "human", "value": "solo"}, {"from": "gpt", "value": "ok"}]},
 {"id": "c", "conversations": []}
]`

// sessionTexts renders a set's sessions as "text/max_tokens ..." per session.
func sessionTexts(set Set) []string {
	var out []string
	for _, s := range set.Sessions {
		var turns []string
		for _, p := range s.Turns {
			turns = append(turns, fmt.Sprintf("%s/%d", set.Prompts[p].Text, set.Prompts[p].MaxTokens))
		}
		out = append(out, strings.Join(turns, " | "))
	}
	return out
}

func TestShareGPTSessions(t *testing.T) {
	tok := qwen(t)
	path := writeFile(t, "sg.json", shareGPTMulti)
	r1, r2 := tok.Count("reply one"), tok.Count("reply two")
	cases := []struct {
		turns int
		ds    Dataset
		want  []string
	}{
		{0, Dataset{}, []string{"one/0 | two/0 | three/0", "solo/0"}},
		{2, Dataset{}, []string{"one/0 | two/0", "solo/0"}},
		{0, Dataset{Count: 1}, []string{"one/0 | two/0 | three/0"}},
		// use_output_len: a turn without a reply ends the session.
		{0, Dataset{UseOutputLen: true}, []string{fmt.Sprintf("one/%d | two/%d", r1, r2), fmt.Sprintf("solo/%d", tok.Count("ok"))}},
		// max_model_len: turn 2's history (one, reply one, two) and output over it.
		{0, Dataset{UseOutputLen: true, MaxModelLen: tok.Count("one") + r1 + tok.Count("two") + r2 - 1}, []string{fmt.Sprintf("one/%d", r1), fmt.Sprintf("solo/%d", tok.Count("ok"))}},
	}
	for _, c := range cases {
		ds := c.ds
		set, err := Resolve(Spec{Source: SourceShareGPT, Path: path, Dataset: &ds, Sessions: &Sessions{Turns: c.turns}}, Env{Tokenizer: tok})
		if err != nil {
			t.Fatalf("%d turns %+v: %v", c.turns, c.ds, err)
		}
		if got := sessionTexts(set); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%d turns %+v: sessions %q, want %q", c.turns, c.ds, got, c.want)
		}
		wantEmpty := 1 // entry c; with count 1 it is past the count and not looked at
		if c.ds.Count == 1 {
			wantEmpty = 0
		}
		if set.Record.Skipped[SkipEmpty] != wantEmpty || set.Record.Params["turns"] != c.turns {
			t.Errorf("%d turns %+v: record %+v", c.turns, c.ds, set.Record)
		}
	}
}

func TestChatSessions(t *testing.T) {
	path := writeFile(t, "c.jsonl", `{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}], "max_tokens": 7}
{"messages": [{"role": "user", "content": "only"}]}
`)
	set, err := Resolve(Spec{Source: SourceChatJSONL, Path: path, Sessions: &Sessions{}}, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if got := sessionTexts(set); strings.Join(got, "\n") != "q1/7 | q2/7\nonly/0" {
		t.Errorf("sessions %q", got)
	}
	// The first turn sends the messages up to its user message; later
	// turns their user message alone (the line's reply is not sent).
	first := set.Prompts[set.Sessions[0].Turns[0]]
	if len(first.Messages) != 2 || first.Messages[0].Role != "system" || set.Prompts[set.Sessions[0].Turns[1]].Messages != nil ||
		set.Prompts[set.Sessions[1].Turns[0]].Messages != nil {
		t.Errorf("prompts %+v", set.Prompts)
	}
}

func TestSyntheticSessions(t *testing.T) {
	tok := qwen(t)
	s := Synthetic{InputLen: Length{Mean: 20, RangeRatio: 0.5}, OutputLen: Length{Fixed: 9}, Count: 3, Seed: 2}
	set, err := Resolve(Spec{Source: SourceSynthetic, Synthetic: &s, Sessions: &Sessions{Turns: 4}}, Env{Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Sessions) != 3 || len(set.Prompts) != 12 {
		t.Fatalf("%d sessions, %d prompts, want 3 and 12", len(set.Sessions), len(set.Prompts))
	}
	again, _ := Resolve(Spec{Source: SourceSynthetic, Synthetic: &s, Sessions: &Sessions{Turns: 4}}, Env{Tokenizer: tok})
	for i, p := range set.Prompts {
		if n := tok.Count(p.Text); n < 10 || n > 30 || p.MaxTokens != 9 {
			t.Errorf("prompt %d: %d tokens, max_tokens %d", i, n, p.MaxTokens)
		}
		if again.Prompts[i].Text != p.Text {
			t.Errorf("prompt %d differs between two resolves: not seeded", i)
		}
	}
	if _, err := Resolve(Spec{Source: SourceSynthetic, Synthetic: &s, Sessions: &Sessions{}}, Env{Tokenizer: tok}); err == nil {
		t.Error("synthetic sessions of 0 turns accepted")
	}
	if _, err := Resolve(Spec{Inline: []string{"a"}, Sessions: &Sessions{Turns: 2}}, Env{}); err == nil || !strings.Contains(err.Error(), "has no conversations") {
		t.Errorf("inline sessions: %v", err)
	}
}

func TestThinkTimeDraw(t *testing.T) {
	fixed := ThinkTime{Mean: time.Second}
	if fixed.Draw(0, 1) != 0 || fixed.Draw(3, 2) != time.Second {
		t.Errorf("fixed: turn 1 %v, turn 2 %v", fixed.Draw(0, 1), fixed.Draw(3, 2))
	}
	for _, dist := range []string{ThinkExponential, ThinkUniform} {
		tt := ThinkTime{Mean: time.Second, Distribution: dist, Seed: 5}
		var sum time.Duration
		distinct := map[time.Duration]bool{}
		for run := range 2000 {
			d := tt.Draw(run, 2)
			if d != tt.Draw(run, 2) || d < 0 || (dist == ThinkUniform && d > 2*time.Second) {
				t.Fatalf("%s: draw %v of run %d", dist, d, run)
			}
			sum += d
			distinct[d] = true
		}
		if mean := sum / 2000; mean < 900*time.Millisecond || mean > 1100*time.Millisecond || len(distinct) < 1000 {
			t.Errorf("%s: mean %v over 2000 draws, %d distinct", dist, mean, len(distinct))
		}
	}
	if (ThinkTime{Mean: time.Second, Distribution: "zipf"}).Check() == nil || (ThinkTime{Mean: -1}).Check() == nil {
		t.Error("Check accepted a bad think time")
	}
}
