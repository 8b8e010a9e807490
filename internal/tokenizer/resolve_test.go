package tokenizer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rehearse/rehearse/internal/hfhub"
)

const tinyCommit = "0123456789abcdef0123456789abcdef01234567"

// hermetic points the Hugging Face cache at an empty folder and takes the
// Hub away; it returns the cache.
func hermetic(t *testing.T) string {
	t.Helper()
	hub := t.TempDir()
	t.Setenv("HF_HUB_CACHE", hub)
	t.Setenv("HF_HUB_OFFLINE", "1")
	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:1")
	return hub
}

// putCached writes data as model's tokenizer.json at commit in the cache,
// with refs/main naming the commit.
func putCached(t *testing.T, hub, model string, data []byte) string {
	t.Helper()
	repo := filepath.Join(hub, "models--"+strings.ReplaceAll(model, "/", "--"))
	snap := filepath.Join(repo, "snapshots", tinyCommit)
	for _, d := range []string{snap, filepath.Join(repo, "refs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(tinyCommit), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(snap, "tokenizer.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func sha(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

func TestResolveOrder(t *testing.T) {
	hub := hermetic(t)
	tiny := tinyJSON(t, nil)
	cached := putCached(t, hub, "org/tiny", tiny)
	putCached(t, hub, "Qwen/Qwen3-8B", tiny)
	folder := t.TempDir()
	file := filepath.Join(folder, "tokenizer.json")
	if err := os.WriteFile(file, tiny, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		req    Request
		kind   string
		source string
		note   string
	}{
		{"a file", Request{Path: file, Model: "org/tiny"}, OriginPath, file, ""},
		{"a folder", Request{Path: folder}, OriginPath, file, ""},
		{"a named variant", Request{Variant: VariantQwen25, Model: "org/tiny"}, OriginEmbedded, "embedded", ""},
		{"the model's folder", Request{Model: folder}, OriginPath, file, ""},
		{"the cache", Request{Model: "org/tiny"}, OriginCache, cached, ""},
		{"the cache at a revision", Request{Model: "org/tiny@" + tinyCommit}, OriginCache, cached, ""},
		{"the cache before the embedded file", Request{Model: "Qwen/Qwen3-8B"}, OriginCache, "", ""},
		{"Qwen2.5, not cached", Request{Model: "Qwen/Qwen2.5-7B-Instruct", Revision: "abc"}, OriginEmbedded, "embedded", "embedded qwen2.5 tokenizer.json, of the family of Qwen/Qwen2.5-7B-Instruct"},
		{"Qwen3, not cached", Request{Model: "Qwen/Qwen3-30B-A3B"}, OriginEmbedded, "embedded", "embedded qwen3"},
		{"an ollama name", Request{Model: "qwen2.5:1.5b"}, OriginEmbedded, "embedded", "embedded qwen2.5"},
	} {
		tok, o, err := Resolve(context.Background(), c.req)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if o.Kind != c.kind || (c.source != "" && tok.Info().Source != c.source) || !strings.Contains(o.Note, c.note) || (c.note == "" && o.Note != "") {
			t.Errorf("%s: origin %+v, source %s", c.name, o, tok.Info().Source)
		}
	}
}

func TestResolveStops(t *testing.T) {
	hermetic(t)
	for _, c := range []struct {
		name string
		req  Request
		want []string
	}{
		{"another model, offline", Request{Model: "meta-llama/Llama-3.1-8B-Instruct"},
			[]string{"no tokenizer.json of model meta-llama/Llama-3.1-8B-Instruct at hand", "is not in the Hugging Face cache", "HF_HUB_OFFLINE is set"}},
		{"a served name", Request{Model: "m"}, []string{"no tokenizer.json of model m at hand", `model id "m" is not a Hugging Face repository id`}},
		{"Qwen3.5 is not Qwen3's", Request{Model: "Qwen/Qwen3.5-9B"}, []string{"HF_HUB_OFFLINE is set"}},
		{"nothing named", Request{}, []string{"no tokenizer was named"}},
	} {
		_, _, err := Resolve(context.Background(), c.req)
		var nf *NotFoundError
		if !errors.As(err, &nf) {
			t.Errorf("%s: %v, want a NotFoundError", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}
	if _, _, err := Resolve(context.Background(), Request{Path: "/nonexistent/tokenizer.json", Model: "Qwen/Qwen3-8B"}); err == nil || !strings.Contains(err.Error(), "/nonexistent/tokenizer.json") {
		t.Errorf("a named path that is not there must be the answer, not the model's family: %v", err)
	}
}

// A tokenizer.json found for the model that cannot be counted exactly is
// refused by the component's name: never counted, never traded for the
// embedded file of the model's family.
func TestResolveRefusesByName(t *testing.T) {
	hub := hermetic(t)
	metaspace := tinyJSON(t, func(j map[string]any) {
		j["normalizer"] = nil
		j["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}
	})
	putCached(t, hub, "Qwen/Qwen2.5-1.5B", metaspace)
	_, _, err := Resolve(context.Background(), Request{Model: "Qwen/Qwen2.5-1.5B"})
	var re *RefusedError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), `pre_tokenizer type "Metaspace" is not implemented`) {
		t.Errorf("a Metaspace file in the cache: %v", err)
	}
	unigram := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(unigram, tinyJSON(t, func(j map[string]any) { j["model"].(map[string]any)["type"] = "Unigram" }), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Resolve(context.Background(), Request{Path: unigram}); !errors.As(err, &re) || !strings.Contains(err.Error(), `model.type "Unigram" is not implemented`) || re.Path != unigram {
		t.Errorf("a Unigram file: %v", err)
	}
}

// tinyHub serves data as every repository's tokenizer.json, as the Hub
// answers, and counts what it is asked.
func tinyHub(t *testing.T, data []byte) (*httptest.Server, *atomic.Int32) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if strings.HasSuffix(r.URL.Path, "/resolve/"+tinyCommit+"/tokenizer_config.json") && strings.Contains(r.URL.Path, "/org/fresh/") {
			cfg := []byte(`{"chat_template": "{{ messages[0].content }}"}`)
			w.Header().Set("X-Repo-Commit", tinyCommit)
			w.Header().Set("ETag", `"`+sha(cfg)+`"`)
			w.Write(cfg)
			return
		}
		if !strings.HasSuffix(r.URL.Path, "/resolve/main/tokenizer.json") {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("X-Repo-Commit", tinyCommit)
		w.Header().Set("ETag", `"`+sha(data)+`"`)
		w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv, &asked
}

func TestResolveFromTheHub(t *testing.T) {
	hub := hermetic(t)
	tiny := tinyJSON(t, nil)
	srv, asked := tinyHub(t, tiny)
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HUB_OFFLINE", "")
	tok, o, err := Resolve(context.Background(), Request{Model: "org/fresh"})
	want := filepath.Join(hub, "models--org--fresh", "snapshots", tinyCommit, "tokenizer.json")
	if err != nil || o.Kind != OriginHub || tok.Info().Source != want || tok.Info().SHA256 != sha(tiny) {
		t.Fatalf("from the Hub: %+v, %v", o, err)
	}
	if !strings.Contains(o.Note, "tokenizer.json of org/fresh at commit "+tinyCommit+" was downloaded from "+srv.URL) {
		t.Errorf("note %q", o.Note)
	}
	// Its tokenizer_config.json (its chat template) was fetched beside it,
	// at the same commit: two requests. The next run finds it in the
	// cache, and asks the Hub nothing.
	if data, err := os.ReadFile(filepath.Join(filepath.Dir(want), "tokenizer_config.json")); err != nil || !strings.Contains(string(data), "chat_template") || !strings.Contains(o.Note, "with its tokenizer_config.json") {
		t.Errorf("tokenizer_config.json beside the tokenizer: %q, %v; note %q", data, err, o.Note)
	}
	if _, o, err := Resolve(context.Background(), Request{Model: "org/fresh"}); err != nil || o.Kind != OriginCache || asked.Load() != 2 {
		t.Errorf("again: %+v, %v, the Hub asked %d times", o, err, asked.Load())
	}
	// A Qwen-family model is the embedded file's before the Hub is asked.
	if _, o, err := Resolve(context.Background(), Request{Model: "Qwen/Qwen3-0.6B"}); err != nil || o.Kind != OriginEmbedded || asked.Load() != 2 {
		t.Errorf("Qwen3: %+v, %v, the Hub asked %d times", o, err, asked.Load())
	}
	// What the Hub lacks is a stop that says so.
	if _, _, err := Resolve(context.Background(), Request{Model: "org/fresh@v9"}); err == nil || !strings.Contains(err.Error(), "EntryNotFound") {
		t.Errorf("a revision the Hub lacks: %v", err)
	}
	t.Setenv("HF_HUB_OFFLINE", "1")
	if _, _, err := Resolve(context.Background(), Request{Model: "org/other"}); err == nil || asked.Load() != 3 {
		t.Errorf("offline: %v, the Hub asked %d times", err, asked.Load())
	}
	// A file the Hub gives that cannot be counted exactly is refused by name.
	wordpiece, _ := tinyHub(t, tinyJSON(t, func(j map[string]any) { j["model"].(map[string]any)["type"] = "WordPiece" }))
	_, _, err = Resolve(context.Background(), Request{Model: "org/bert", Hub: &hfhub.Client{Endpoint: wordpiece.URL, CacheDir: t.TempDir()}})
	if re := (*RefusedError)(nil); !errors.As(err, &re) || !strings.Contains(err.Error(), `model.type "WordPiece"`) {
		t.Errorf("a WordPiece file from the Hub: %v", err)
	}
}

// With a digest (a bundle's provenance), only a file with it will do.
func TestResolveDigest(t *testing.T) {
	hub := hermetic(t)
	tiny := tinyJSON(t, nil)
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, tiny, 0o644); err != nil {
		t.Fatal(err)
	}
	cached := putCached(t, hub, "org/tiny", tiny)
	if q25, _, err := Resolve(context.Background(), Request{SHA256: EmbeddedSHA256, Variant: VariantQwen25, Path: path}); err != nil || q25.Info().Name != VariantQwen25 {
		t.Fatalf("embedded digest with variant qwen2.5: %v", err)
	}
	if q3, _, err := Resolve(context.Background(), Request{SHA256: EmbeddedSHA256}); err != nil || q3.Info().Name != VariantQwen3 {
		t.Fatalf("embedded digest, no variant: %v (want the file as it is, Qwen3)", err)
	}
	if got, _, err := Resolve(context.Background(), Request{SHA256: sha(tiny), Path: path}); err != nil || got.Info().Source != path {
		t.Errorf("a path with the digest: %v", err)
	}
	if got, _, err := Resolve(context.Background(), Request{SHA256: sha(tiny), Path: "/nonexistent", Model: "org/tiny"}); err != nil || got.Info().Source != cached {
		t.Errorf("the cache, past a path that is not there: %v", err)
	}
	other := strings.Repeat("0", 64)
	_, _, err := Resolve(context.Background(), Request{SHA256: other, Path: path, Model: "Qwen/Qwen2.5-1.5B"})
	for _, want := range []string{"no tokenizer with sha256 " + other + " at hand", path + " has sha256 " + sha(tiny), "is not in the Hugging Face cache", "the embedded file has sha256 " + EmbeddedSHA256, "HF_HUB_OFFLINE"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

func TestFamilyVariant(t *testing.T) {
	for id, want := range map[string]string{
		"Qwen/Qwen2.5-1.5B-Instruct":              VariantQwen25,
		"Qwen/Qwen2-7B":                           VariantQwen25,
		"Qwen/Qwen2.5":                            VariantQwen25,
		"unsloth/Qwen2.5-Coder-7B-Instruct-GGUF":  VariantQwen25,
		"qwen2.5:7b":                              VariantQwen25,
		"Qwen/Qwen3-8B":                           VariantQwen3,
		"Qwen/Qwen3-Coder-30B-A3B-Instruct":       VariantQwen3,
		"qwen3":                                   VariantQwen3,
		"Qwen/Qwen3.5-9B":                         "",
		"Qwen/QwQ-32B":                            "",
		"deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": "",
		"meta-llama/Llama-3.1-8B":                 "",
		"Qwen/Qwen25-x":                           "",
	} {
		if got := familyVariant(id); got != want {
			t.Errorf("familyVariant(%q) = %q, want %q", id, got, want)
		}
	}
}

// TestFile: a folder names the tokenizer.json in it; a file, or a path that
// is not there, names itself (reading it says what is wrong).
func TestFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "t.json")
	if err := os.WriteFile(file, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		dir:                           filepath.Join(dir, "tokenizer.json"),
		file:                          file,
		filepath.Join(dir, "missing"): filepath.Join(dir, "missing"),
	} {
		if got := File(path); got != want {
			t.Errorf("File(%q) = %q, want %q", path, got, want)
		}
	}
}
