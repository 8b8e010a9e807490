package config

import (
	"strings"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/workload"
)

const synthHead = "{source: synthetic, input_len: {fixed: 8}, output_len: {fixed: 4}, count: 2}\n"

func TestSessionsBlock(t *testing.T) {
	cases := []struct {
		yaml string
		want workload.Sessions
	}{
		{"  sessions: {turns: 3}", workload.Sessions{Turns: 3}},
		{"  sessions: {turns: 2, think_time: 500ms}", workload.Sessions{Turns: 2, Think: workload.ThinkTime{Mean: 500 * time.Millisecond}}},
		{"  sessions: {turns: 2, think_time: 1.5}", workload.Sessions{Turns: 2, Think: workload.ThinkTime{Mean: 1500 * time.Millisecond}}},
		{"  sessions: {turns: 2, think_time: {mean: 2s, distribution: exponential, seed: 4}}",
			workload.Sessions{Turns: 2, Think: workload.ThinkTime{Mean: 2 * time.Second, Distribution: "exponential", Seed: 4}}},
	}
	for _, c := range cases {
		r, err := Parse([]byte(promptsHead+synthHead+c.yaml+"\n"), "r.yaml", t.TempDir())
		if err != nil {
			t.Errorf("%s: %v", c.yaml, err)
			continue
		}
		if got := r.Workload.SessionsSpec(); got == nil || *got != c.want {
			t.Errorf("%s: sessions %+v, want %+v", c.yaml, got, c.want)
		}
	}
	r, err := Parse([]byte(promptsHead+synthHead), "r.yaml", t.TempDir())
	if err != nil || r.Workload.SessionsSpec() != nil {
		t.Errorf("no sessions block: %v, %+v", err, r.Workload.SessionsSpec())
	}
}

func TestSessionsProblems(t *testing.T) {
	cases := []struct{ prompts, sessions, want string }{
		{"[a, b]\n", "{turns: 2}", "workload.sessions: the inline prompt source has no conversations"},
		{"{source: builtin}\n", "{turns: 2}", "workload.sessions: the builtin prompt source has no conversations"},
		{synthHead, "{}", "workload.sessions.turns: 0: the synthetic source needs the number of turns"},
		{"{source: sharegpt, path: x}\n", "{turns: -1}", "workload.sessions.turns: -1: must be 0"},
		{synthHead, "{turns: 2, think_time: -1s}", "workload.sessions.think_time: -1s: negative"},
		{synthHead, "{turns: 2, think_time: soon}", `workload.sessions.think_time: "soon" is not a duration`},
		{synthHead, "{turns: 2, think_time: {mean: 1s, distribution: zipf}}", `workload.sessions.think_time.distribution: "zipf": want one of fixed, exponential, uniform`},
		{synthHead, "{turns: 2, think_time: {mean: 1s, shape: 2}}", "workload.sessions.think_time.shape: unknown key (known: mean, distribution, seed)"},
		{synthHead, "{turns: 2, max_turns: 3}", "workload.sessions.max_turns: unknown key (known: turns, think_time)"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(promptsHead+c.prompts+"  sessions: "+c.sessions+"\n"), "r.yaml", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s / %s: error %v, want %q", c.prompts, c.sessions, err, c.want)
		}
	}
}
