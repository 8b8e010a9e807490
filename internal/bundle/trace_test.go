package bundle

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

// TestCheckTraceReplayRecords: a record of a trace replay sends prompt i as
// request i at workload.arrivals_s[i]; verify names the record that does not.
func TestCheckTraceReplayRecords(t *testing.T) {
	c := recordContext{
		waves:    map[int]contract.Wave{4: {ID: 4, Server: "a", Concurrency: 8, Repeat: 1, Kind: contract.KindRecorded, Mode: contract.ModeOpen, Arrival: contract.ArrivalTrace}},
		prompts:  2,
		source:   SourceTokenizer,
		workload: &Workload{Prompts: []string{"p0", "p one"}, MaxTokens: 8, PromptMaxTokens: []int{0, 16}, ArrivalsS: []float64{0, 0.005}},
	}
	base := validRecord()
	base.Client, base.Prompt, base.IntendedStartS = 1, 1, 0.005
	for _, tc := range []struct {
		name string
		edit func(*contract.Record)
		want string
	}{
		{"valid", func(*contract.Record) {}, ""},
		{"another prompt", func(r *contract.Record) { r.Prompt, r.MaxTokens = 0, 8 }, "records[0].prompt: 0, but a trace replay's request 1 sends prompt 1"},
		{"another time", func(r *contract.Record) { r.IntendedStartS = 0.002 }, "records[0].intended_start_s: 0.002, but workload.arrivals_s[1] is 0.005"},
	} {
		r := base
		tc.edit(&r)
		var got []string
		for _, p := range checkRecord(0, &r, c) {
			got = append(got, p.Field+": "+p.Msg)
		}
		switch {
		case tc.want == "" && len(got) > 0:
			t.Errorf("%s: %q", tc.name, got)
		case tc.want != "" && (len(got) != 1 || got[0] != tc.want):
			t.Errorf("%s: %q, want [%q]", tc.name, got, tc.want)
		}
	}
	res := &Results{Workload: Workload{Prompts: []string{"a", "b"}, ArrivalsS: []float64{1, 0.5}}}
	if probs := checkHeader(res); len(probs) != 1 || !strings.Contains(probs[0].Field, "arrivals_s[1]") {
		t.Errorf("backwards arrivals: %+v", probs)
	}
	res.Workload.ArrivalsS = []float64{0}
	if probs := checkHeader(res); len(probs) != 1 || !strings.Contains(probs[0].Msg, "1 arrivals for 2 prompts") {
		t.Errorf("short arrivals: %+v", probs)
	}
}
