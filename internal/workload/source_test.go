package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestResolveSources(t *testing.T) {
	content := "{\"prompt\":\"a\"}\n{\"prompt\":\"b\"}\n"
	path := writeFile(t, "p.jsonl", content)
	sum := sha256.Sum256([]byte(content))
	cases := []struct {
		spec   Spec
		name   string
		texts  []string
		sha256 string
	}{
		{Spec{}, SourceBuiltin, builtin, ""},
		{Spec{Inline: []string{"x", "y"}}, SourceInline, []string{"x", "y"}, ""},
		{Spec{Path: path}, SourceFile, []string{"a", "b"}, hex.EncodeToString(sum[:])},
		{Spec{Source: SourceFile, Path: path}, SourceFile, []string{"a", "b"}, hex.EncodeToString(sum[:])},
	}
	for _, c := range cases {
		set, err := Resolve(c.spec, Env{})
		if err != nil {
			t.Fatalf("%+v: %v", c.spec, err)
		}
		if set.Record.Name != c.name || strings.Join(set.Texts(), "|") != strings.Join(c.texts, "|") {
			t.Errorf("%+v: %s %q", c.spec, set.Record.Name, set.Texts())
		}
		want := c.sha256
		if want == "" {
			want = PromptsSHA256(set.Prompts)
		}
		if set.Record.SHA256 != want || len(want) != 64 {
			t.Errorf("%+v: sha256 %q, want %q", c.spec, set.Record.SHA256, want)
		}
		if set.MaxTokens() != nil {
			t.Errorf("%+v: max_tokens %v, want none", c.spec, set.MaxTokens())
		}
	}
}

func TestResolveErrors(t *testing.T) {
	cases := []struct {
		spec Spec
		want string
	}{
		{Spec{Source: "nope"}, `prompt source "nope": want one of`},
		{Spec{Source: SourceInline}, "prompt source inline: no prompts"},
		{Spec{Path: writeFile(t, "e.txt", "\n")}, "e.txt: no prompts"},
	}
	for _, c := range cases {
		if _, err := Resolve(c.spec, Env{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.spec, err, c.want)
		}
	}
}

func TestSetMaxTokens(t *testing.T) {
	s := Set{Prompts: []Prompt{{Text: "a"}, {Text: "b", MaxTokens: 7}}}
	if got := s.MaxTokens(); len(got) != 2 || got[0] != 0 || got[1] != 7 {
		t.Fatalf("%v", got)
	}
}
