package workload

import (
	"strings"
	"testing"
)

func TestChatJSONL(t *testing.T) {
	content := `{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], "max_tokens": 12}

{"messages": [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "second"}], "output_len": 30}
{"messages": [{"role": "user", "content": "plain"}]}
`
	path := writeFile(t, "c.jsonl", content)
	set, err := Resolve(Spec{Source: SourceChatJSONL, Path: path}, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(set.Texts(), "|"); got != "hi|second|plain" {
		t.Errorf("texts %q", got)
	}
	if got := set.MaxTokens(); len(got) != 3 || got[0] != 12 || got[1] != 30 || got[2] != 0 {
		t.Errorf("max_tokens %v", got)
	}
	ms := set.Messages()
	if len(ms) != 3 || len(ms[0]) != 2 || ms[0][0] != (Message{"system", "be brief"}) || len(ms[1]) != 3 || ms[1][1].Role != "assistant" {
		t.Errorf("messages %v", ms)
	}
	if set.Record.Name != SourceChatJSONL || len(set.Record.SHA256) != 64 || set.Record.SHA256 == PromptsSHA256(set.Prompts) {
		t.Errorf("record %+v: want the file's digest", set.Record)
	}
	tok := qwen(t)
	ds := Dataset{MaxModelLen: 15, Count: 5}
	set, err = Resolve(Spec{Source: SourceChatJSONL, Path: path, Dataset: &ds}, Env{Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(set.Texts(), "|"); got != "hi|plain" || set.Record.Skipped[SkipTooLong] != 1 {
		t.Errorf("max_model_len 15: %q skipped %v", got, set.Record.Skipped)
	}
}

func TestChatJSONLErrors(t *testing.T) {
	good := `{"messages": [{"role": "user", "content": "a"}]}` + "\n"
	cases := []struct{ line, want string }{
		{`not json`, "c.jsonl:2: not a JSON object"},
		{`{"prompt": "a"}`, `c.jsonl:2: no "messages" field`},
		{`{"messages": "a"}`, `c.jsonl:2: "messages": want a list`},
		{`{"messages": []}`, `c.jsonl:2: "messages": empty`},
		{`{"messages": [{"content": "a"}]}`, `c.jsonl:2: "messages[0].role": want a non-empty string`},
		{`{"messages": [{"role": "user", "content": [{"type": "text"}]}]}`, `c.jsonl:2: "messages[0].content": want a string`},
		{`{"messages": [{"role": "system", "content": "a"}]}`, `c.jsonl:2: "messages": no user message with content`},
		{`{"messages": [{"role": "user", "content": "a"}], "max_tokens": 0}`, `c.jsonl:2: "max_tokens" is 0, want a whole number`},
		{`{"messages": [{"role": "user", "content": "a"}], "output_len": "long"}`, `c.jsonl:2: "output_len" is "long"`},
		{`{"messages": [{"role": "user", "content": "a"}], "max_tokens": 3, "output_len": 4}`, `c.jsonl:2: "max_tokens" 3 and "output_len" 4 disagree`},
	}
	for _, c := range cases {
		_, err := Resolve(Spec{Source: SourceChatJSONL, Path: writeFile(t, "c.jsonl", good+c.line+"\n")}, Env{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.line, err, c.want)
		}
	}
	if _, err := Resolve(Spec{Source: SourceChatJSONL, Path: writeFile(t, "c.jsonl", "\n\n")}, Env{}); err == nil || !strings.Contains(err.Error(), "c.jsonl: no usable lines") {
		t.Errorf("empty: %v", err)
	}
	if _, err := Resolve(Spec{Source: SourceChatJSONL, Path: writeFile(t, "c.jsonl", good), Dataset: &Dataset{MaxModelLen: 9}}, Env{}); err == nil || !strings.Contains(err.Error(), "needs the pinned tokenizer") {
		t.Errorf("no tokenizer: %v", err)
	}
}
