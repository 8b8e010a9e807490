package rehearsal

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

const tokCommit = "0123456789abcdef0123456789abcdef01234567"

// fakeCache points HF_HUB_CACHE at a new cache holding data as model's
// tokenizer.json at tokCommit (refs/main naming it), and takes the Hub
// away; it returns the snapshot's path.
func fakeCache(t *testing.T, model string, data []byte) string {
	t.Helper()
	hub := t.TempDir()
	t.Setenv("HF_HUB_CACHE", hub)
	t.Setenv("HF_HUB_OFFLINE", "1")
	repo := filepath.Join(hub, "models--"+strings.ReplaceAll(model, "/", "--"))
	dir := filepath.Join(repo, "snapshots", tokCommit)
	for _, d := range []string{dir, filepath.Join(repo, "refs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(tokCommit), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// byteLevelJSON is a GPT-2 style tokenizer.json of the 256 byte tokens and
// no merges, with model.type set to modelType.
func byteLevelJSON(t *testing.T, modelType string) []byte {
	t.Helper()
	vocab := map[string]int{}
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xa1 && b <= 0xac || b >= 0xae) {
			r = rune(256 + n)
			n++
		}
		vocab[string(r)] = b
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	data, err := json.Marshal(map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": []any{}, "normalizer": nil,
		"pre_tokenizer": byteLevel, "post_processor": byteLevel, "decoder": byteLevel,
		"model": map[string]any{"type": modelType, "vocab": vocab, "merges": []any{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

const tokServer = "servers: [{name: v, launch: [vllm, '{port}']}]\n"

func TestOpenTokenizerOrder(t *testing.T) {
	good := byteLevelJSON(t, "BPE")
	cached := fakeCache(t, "org/tiny", good)
	other := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(other, good, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, yaml string
		source     string
		variant    string
		note       string
	}{
		{"the model's own file in the cache", "model: {id: org/tiny}\n", cached, "", ""},
		{"an explicit path wins", "model: {id: org/tiny}\ntokenizer: {path: " + other + "}\n", other, "", ""},
		{"an explicit folder", "model: {id: org/tiny}\ntokenizer: {path: " + filepath.Dir(other) + "}\n", other, "", ""},
		{"a named variant wins", "model: {id: org/tiny}\ntokenizer: {variant: qwen3}\n", "embedded", "qwen3", ""},
		{"an explicit cached model", "model: {id: m}\ntokenizer: {model: org/tiny, revision: " + tokCommit + "}\n", cached, "", ""},
		{"Qwen2.5 not cached: the embedded file of its family", "model: {id: Qwen/Qwen2.5-7B, revision: x}\n", "embedded", "qwen2.5", "of the family of Qwen/Qwen2.5-7B"},
		{"Qwen3 not cached", "model: {id: Qwen/Qwen3-8B}\n", "embedded", "qwen3", "embedded qwen3"},
	} {
		o, err := OpenTokenizer(context.Background(), parse(t, c.yaml+tokServer))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		prov, note := o.Provenance, o.Note
		if prov.Source != c.source || prov.Variant != c.variant || !strings.Contains(note, c.note) || (c.note == "" && note != "") {
			t.Errorf("%s: provenance %+v, note %q", c.name, prov, note)
		}
		// Provenance names the file by the SHA-256 of the bytes read.
		want := tokenizer.EmbeddedSHA256
		if c.source != "embedded" {
			want = fmt.Sprintf("%x", sha256.Sum256(good))
		}
		if prov.SHA256 != want || o.Tokenizer.Info().SHA256 != want {
			t.Errorf("%s: sha256 %s, want %s", c.name, prov.SHA256, want)
		}
	}
	o, err := OpenTokenizer(context.Background(), parse(t, "model: {id: org/tiny}\ntokenizer: {variant: usage}\n"+tokServer))
	if err != nil || o.Tokenizer != nil || o.Provenance.Name != VariantUsage {
		t.Errorf("usage: %+v, %v", o, err)
	}
}

// A rehearsal whose model's own tokenizer is not at hand, or cannot be
// counted exactly, stops with the key that named it; another model's
// tokenizer never counts in its place.
func TestOpenTokenizerStops(t *testing.T) {
	fakeCache(t, "org/unigram", byteLevelJSON(t, "Unigram"))
	bad := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(bad, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	var nf *tokenizer.NotFoundError
	var re *tokenizer.RefusedError
	for _, c := range []struct {
		name, yaml string
		field      string
		as         any
		want       string
	}{
		{"another family, offline", "model: {id: meta-llama/Llama-3.1-8B}\n", "model.id", &nf, "HF_HUB_OFFLINE is set"},
		{"a served name", "model: {id: m}\n", "model.id", &nf, `model id "m" is not a Hugging Face repository id`},
		{"an explicit model", "model: {id: m}\ntokenizer: {model: org/none, revision: abc}\n", "tokenizer.model", &nf, "org/none at revision abc is not in the Hugging Face cache"},
		{"a Unigram model", "model: {id: org/unigram}\n", "model.id", &re, `model.type "Unigram" is not implemented`},
		{"a file that is no tokenizer", "model: {id: Qwen/Qwen3-8B}\ntokenizer: {path: " + bad + "}\n", "tokenizer.path", &re, bad},
	} {
		_, err := OpenTokenizer(context.Background(), parse(t, c.yaml+tokServer))
		var te *TokenizerError
		if !errors.As(err, &te) || te.Field != c.field || !errors.As(err, c.as) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %s and %q", c.name, err, c.field, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: not one line: %q", c.name, err)
		}
	}
}

func TestRecountTokenizer(t *testing.T) {
	snap := filepath.Join("/c", "models--org--m", "snapshots", tokCommit, "tokenizer.json")
	p := bundle.Provenance{Model: bundle.Model{ID: "org/m"}, Tokenizer: bundle.Tokenizer{SHA256: "ab", Source: snap}}
	if r := recountRequest(p, ""); r.Path != snap || r.Model != "org/m" || r.Revision != tokCommit || r.SHA256 != "ab" {
		t.Errorf("from a cache snapshot: %+v", r)
	}
	if r := recountRequest(p, "/x/tokenizer.json"); r.Path != "/x/tokenizer.json" {
		t.Errorf("--tokenizer first: %+v", r)
	}
	p.Model.Revision, p.Tokenizer = "v1", bundle.Tokenizer{SHA256: tokenizer.EmbeddedSHA256, Source: "embedded", Variant: "qwen2.5"}
	if r := recountRequest(p, ""); r.Path != "" || r.Revision != "v1" || r.Variant != "qwen2.5" {
		t.Errorf("embedded: %+v", r)
	}
	if _, err := RecountTokenizer(context.Background(), bundle.Provenance{}, ""); err == nil || !strings.Contains(err.Error(), "no tokenizer sha256") {
		t.Errorf("no digest: %v", err)
	}
}
