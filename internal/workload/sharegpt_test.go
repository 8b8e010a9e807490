package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

const shareGPT = `[
 {"id": "a", "conversations": [{"from": "human", "value": "Hello there"}, {"from": "gpt", "value": "General Kenobi, you are a bold one"}]},
 {"id": "b", "conversations": []},
 {"id": "c", "conversations": [{"from": "gpt", "value": "no question"}, {"from": "human", "value": "  "}]},
 {"id": "d", "conversations": [{"from": "system", "value": "be brief"}, {"from": "human", "value": "Why is the sky blue?"}]},
 {"id": "e", "conversations": [{"from": "human", "value": "` + "long long long long long long long long long long long long" + `"}, {"from": "gpt", "value": "ok"}]}
]`

func TestShareGPT(t *testing.T) {
	tok := qwen(t)
	path := writeFile(t, "sg.json", shareGPT)
	sum := sha256.Sum256([]byte(shareGPT))
	cases := []struct {
		ds      Dataset
		texts   []string
		max     []int
		skipped map[string]int
	}{
		{Dataset{}, []string{"Hello there", "Why is the sky blue?", strings.Repeat("long ", 11) + "long"}, nil, map[string]int{SkipEmpty: 2}},
		{Dataset{Count: 2}, []string{"Hello there", "Why is the sky blue?"}, nil, map[string]int{SkipEmpty: 2}},
		{Dataset{UseOutputLen: true}, []string{"Hello there", strings.Repeat("long ", 11) + "long"},
			[]int{tok.Count("General Kenobi, you are a bold one"), 1}, map[string]int{SkipEmpty: 2, SkipNoReply: 1}},
		{Dataset{UseOutputLen: true, MaxModelLen: 11}, []string{"Hello there"},
			[]int{tok.Count("General Kenobi, you are a bold one")}, map[string]int{SkipEmpty: 2, SkipNoReply: 1, SkipTooLong: 1}},
	}
	for _, c := range cases {
		ds := c.ds
		set, err := Resolve(Spec{Source: SourceShareGPT, Path: path, Dataset: &ds}, Env{Tokenizer: tok})
		if err != nil {
			t.Fatalf("%+v: %v", c.ds, err)
		}
		if strings.Join(set.Texts(), "|") != strings.Join(c.texts, "|") {
			t.Errorf("%+v: prompts %q, want %q", c.ds, set.Texts(), c.texts)
		}
		if got := set.MaxTokens(); len(got) != len(c.max) || (len(got) > 0 && got[0] != c.max[0]) {
			t.Errorf("%+v: max_tokens %v, want %v", c.ds, got, c.max)
		}
		r := set.Record
		if r.Name != SourceShareGPT || r.SHA256 != hex.EncodeToString(sum[:]) || r.Params["path"] != path {
			t.Errorf("%+v: record %+v", c.ds, r)
		}
		for k, v := range c.skipped {
			if r.Skipped[k] != v {
				t.Errorf("%+v: skipped %v, want %v", c.ds, r.Skipped, c.skipped)
			}
		}
	}
}

func TestShareGPTErrors(t *testing.T) {
	tok := qwen(t)
	cases := []struct {
		content string
		ds      Dataset
		env     Env
		want    string
	}{
		{`{"conversations": []}`, Dataset{}, Env{}, `sg.json: want a JSON list of {"conversations": [...]} entries`},
		{`[{"conversations": [{"from": "human", "value": "a"}]}, {"conversations": 3}]`, Dataset{}, Env{}, "sg.json: entry 1 (byte"},
		{`[{"conversations": [{"from": "human", "value": 7}]}]`, Dataset{}, Env{}, "sg.json: entry 0"},
		{`[{"conversations": [{"from": "human", "value": "a"}]}`, Dataset{}, Env{}, "sg.json: the list does not end"},
		{`[]`, Dataset{}, Env{}, "sg.json: no usable entries (skipped: none)"},
		{`[{"conversations": []}, {}]`, Dataset{}, Env{}, "sg.json: no usable entries (skipped: 2 empty)"},
		{`[]`, Dataset{UseOutputLen: true}, Env{}, "need the pinned tokenizer"},
		{`[{"conversations": [{"from": "human", "value": "a b c"}]}]`, Dataset{MaxModelLen: 1}, Env{Tokenizer: tok}, "no usable entries (skipped: 1 too_long)"},
	}
	for _, c := range cases {
		ds := c.ds
		_, err := Resolve(Spec{Source: SourceShareGPT, Path: writeFile(t, "sg.json", c.content), Dataset: &ds}, c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.content, err, c.want)
		}
	}
}
