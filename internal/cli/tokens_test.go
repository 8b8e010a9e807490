package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/tokenizer"
)

// tokensCLI runs "rehearse tokens ARGS" in-process with stdin.
func tokensCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), append([]string{"tokens"}, args...), strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), code
}

// Ids from Hugging Face tokenizers 0.23.2 with the embedded Qwen3 file.
const helloThink = "Hello <think>world</think>"

var helloThinkIDs = []int{9707, 220, 151667, 14615, 151668}

func TestTokensCount(t *testing.T) {
	out, errs, code := tokensCLI(t, helloThink)
	if code != 0 || out != "5\n" {
		t.Fatalf("tokens: code %d, stdout %q, stderr %q; want 0, \"5\\n\"", code, out, errs)
	}
	out, _, code = tokensCLI(t, helloThink, "--ids")
	if code != 0 || out != "5\n[9707,220,151667,14615,151668]\n" {
		t.Fatalf("tokens --ids: code %d, stdout %q", code, out)
	}
	out, _, code = tokensCLI(t, "", "--ids")
	if code != 0 || out != "0\n[]\n" {
		t.Fatalf("tokens --ids of empty stdin: code %d, stdout %q", code, out)
	}
}

func TestTokensVariant(t *testing.T) {
	q25, err := tokenizer.Qwen25()
	if err != nil {
		t.Fatal(err)
	}
	want := q25.Count(helloThink)
	if want <= len(helloThinkIDs) {
		t.Fatalf("Qwen2.5 counts %d tokens in %q; it lacks <think>, so it must count more than Qwen3's %d", want, helloThink, len(helloThinkIDs))
	}
	out, errs, code := tokensCLI(t, helloThink, "--variant", "qwen2.5")
	if code != 0 || strings.TrimSpace(out) != itoa(want) {
		t.Fatalf("tokens --variant qwen2.5: code %d, stdout %q, stderr %q; want %d", code, out, errs, want)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestTokensJSONL(t *testing.T) {
	in := `{"text": "Hello <think>world</think>"}
{"text": "", "other": 1}
{"text": "naïve café 你好 👍🏽"}`
	out, errs, code := tokensCLI(t, in, "--jsonl")
	if code != 0 {
		t.Fatalf("code %d, stderr %q", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 output lines, got %d: %q", len(lines), out)
	}
	tok, err := tokenizer.Default()
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{helloThink, "", "naïve café 你好 👍🏽"}
	for i, l := range lines {
		var rec struct {
			Count int   `json:"count"`
			IDs   []int `json:"ids"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("line %d %q: %v", i+1, l, err)
		}
		want := tok.Encode(texts[i])
		if rec.Count != len(want) || len(rec.IDs) != len(want) {
			t.Errorf("line %d: count %d ids %v, want %v", i+1, rec.Count, rec.IDs, want)
		}
		for k := range want {
			if rec.IDs[k] != want[k] {
				t.Errorf("line %d: ids %v, want %v", i+1, rec.IDs, want)
				break
			}
		}
	}
	if !strings.HasPrefix(lines[0], `{"count":5,"ids":[9707,220,151667,14615,151668]}`) {
		t.Errorf("line 1 = %q, want the library's ids", lines[0])
	}
}

func TestTokensBadInput(t *testing.T) {
	for _, c := range []struct {
		name, stdin string
		args        []string
		code        int
		want        string
	}{
		{"bad json", "{\"text\": \"a\"}\n{\"text\": \n", []string{"--jsonl"}, 2, "stdin:2:"},
		{"no text", "{\"txt\": \"a\"}\n", []string{"--jsonl"}, 2, `stdin:1: no "text" field`},
		{"text not a string", "{\"text\": 3}\n", []string{"--jsonl"}, 2, "stdin:1:"},
		{"empty line", "{\"text\": \"a\"}\n\n{\"text\": \"b\"}\n", []string{"--jsonl"}, 2, "stdin:2: empty line"},
		{"missing file", "x", []string{"--tokenizer", "/nonexistent/tokenizer.json"}, 2, "/nonexistent/tokenizer.json"},
		{"two sources", "x", []string{"--tokenizer", "a.json", "--model", "a/b"}, 2, "give one"},
		{"variant with file", "x", []string{"--tokenizer", "a.json", "--variant", "qwen2.5"}, 2, "--variant applies"},
		{"unknown variant", "x", []string{"--variant", "qwen4"}, 2, `--variant "qwen4"`},
		{"revision alone", "x", []string{"--revision", "main"}, 2, "--revision needs --model"},
		{"bad model id", "x", []string{"--model", "justaname"}, 2, `model id "justaname"`},
		{"not at hand", "x", []string{"--model", "org/absent"}, 2, "HF_HUB_OFFLINE is set, so the Hub is not asked); pass --tokenizer PATH"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, errs, code := tokensCLI(t, c.stdin, c.args...)
			if code != c.code || !strings.Contains(errs, c.want) {
				t.Errorf("code %d stderr %q; want code %d and %q", code, errs, c.code, c.want)
			}
			if strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Errorf("stderr is not one line: %q", errs)
			}
		})
	}
}

// tinyTokenizerJSON is a byte-level BPE tokenizer.json with the 256 byte
// tokens and one merge, "a"+"b" → 256.
func tinyTokenizerJSON(t *testing.T, modelType string) []byte {
	t.Helper()
	vocab := map[string]int{}
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) {
			r = rune(256 + n)
			n++
		}
		vocab[string(r)] = b
	}
	vocab["ab"] = 256
	j := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": []any{},
		"normalizer":     map[string]any{"type": "NFC"},
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"post_processor": nil,
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model":          map[string]any{"type": modelType, "vocab": vocab, "merges": []string{"a b"}},
	}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTokensFileAndCache(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(good, tinyTokenizerJSON(t, "BPE"), 0o644); err != nil {
		t.Fatal(err)
	}
	// "abab" merges to two "ab" tokens; " c" is a piece of two byte tokens.
	out, errs, code := tokensCLI(t, "abab c", "--tokenizer", good, "--ids")
	if code != 0 || out != "4\n[256,256,32,99]\n" {
		t.Fatalf("code %d stdout %q stderr %q", code, out, errs)
	}

	bad := filepath.Join(dir, "wordpiece.json")
	if err := os.WriteFile(bad, tinyTokenizerJSON(t, "WordPiece"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code = tokensCLI(t, "x", "--tokenizer", bad)
	if code != 2 || !strings.Contains(errs, bad) || !strings.Contains(errs, `model.type "WordPiece"`) {
		t.Fatalf("unsupported file: code %d stderr %q", code, errs)
	}

	hub := filepath.Join(dir, "hub")
	snap := filepath.Join(hub, "models--org--tiny", "snapshots", "0123abc")
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, "tokenizer.json"), tinyTokenizerJSON(t, "BPE"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(hub, "models--org--tiny", "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hub, "models--org--tiny", "refs", "main"), []byte("0123abc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HF_HUB_CACHE", hub)
	for _, rev := range []string{"0123abc", "main", ""} {
		args := []string{"--model", "org/tiny"}
		if rev != "" {
			args = append(args, "--revision", rev)
		}
		out, errs, code := tokensCLI(t, "ab", args...)
		if code != 0 || out != "1\n" {
			t.Errorf("revision %q: code %d stdout %q stderr %q", rev, code, out, errs)
		}
	}
	_, errs, code = tokensCLI(t, "ab", "--model", "org/tiny", "--revision", "fff")
	if code != 2 || !strings.Contains(errs, "not in the Hugging Face cache") {
		t.Errorf("missing revision: code %d stderr %q", code, errs)
	}
}
