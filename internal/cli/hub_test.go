package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
)

const hubCommit = "89abcdef0123456789abcdef0123456789abcdef"

// qwenJSON is the embedded tokenizer.json's bytes, a real file to serve.
func qwenJSON(t *testing.T) []byte {
	t.Helper()
	gz, err := os.ReadFile(filepath.Join("..", "tokenizer", "qwen3", "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// serveHub answers as the Hugging Face Hub's resolve endpoint does, with
// files[model] as each model's tokenizer.json at hubCommit (401 for a model
// in gated without HF_TOKEN's value, 404 EntryNotFound for another), and
// points the environment at it: HF_ENDPOINT, the Hub online, an empty cache
// of the test's own. It returns the cache and how many times it was asked.
func serveHub(t *testing.T, files map[string][]byte, gated map[string]bool, token string) (string, *atomic.Int32) {
	t.Helper()
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		model, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/"), "/resolve/main/tokenizer.json")
		switch {
		case gated[model] && r.Header.Get("Authorization") != "Bearer "+token:
			w.Header().Set("X-Error-Code", "GatedRepo")
			w.WriteHeader(http.StatusUnauthorized)
		case !ok || files[model] == nil:
			w.Header().Set("X-Error-Code", "EntryNotFound")
			w.WriteHeader(http.StatusNotFound)
		default:
			sum := sha256.Sum256(files[model])
			w.Header().Set("X-Repo-Commit", hubCommit)
			w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
			w.Write(files[model])
		}
	}))
	t.Cleanup(srv.Close)
	cache := t.TempDir()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("HF_HUB_CACHE", cache)
	return cache, &asked
}

// rehearse tokens --model fetches a model's own tokenizer.json from the Hub
// into the cache's layout, where the next run (and Python tools) find it.
func TestTokensFromTheHub(t *testing.T) {
	cache, asked := serveHub(t, map[string][]byte{"org/tiny": tinyTokenizerJSON(t, "BPE")}, nil, "")
	out, errs, code := tokensCLI(t, "abab c", "--model", "org/tiny", "--ids")
	if code != 0 || out != "4\n[256,256,32,99]\n" {
		t.Fatalf("code %d stdout %q stderr %q", code, out, errs)
	}
	repo := filepath.Join(cache, "models--org--tiny")
	if ref, err := os.ReadFile(filepath.Join(repo, "refs", "main")); err != nil || string(ref) != hubCommit {
		t.Errorf("refs/main = %q, %v", ref, err)
	}
	link, err := os.Readlink(filepath.Join(repo, "snapshots", hubCommit, "tokenizer.json"))
	if err != nil || !strings.HasPrefix(link, filepath.Join("..", "..", "blobs")+string(filepath.Separator)) {
		t.Errorf("snapshot link %q, %v", link, err)
	}
	t.Setenv("HF_HUB_OFFLINE", "1")
	// Asked twice before (tokenizer.json, and tokenizer_config.json beside
	// it, which this Hub lacks), and not again.
	if out, errs, code := tokensCLI(t, "ab", "--model", "org/tiny"); code != 0 || out != "1\n" || asked.Load() != 2 {
		t.Errorf("offline, from the cache: code %d stdout %q stderr %q, the Hub asked %d times", code, out, errs, asked.Load())
	}
}

// A model whose own tokenizer is not at hand stops bench before any request
// is sent, with one line saying what to pass; a gated one says HF_TOKEN.
func TestBenchStopsWithoutTheModelsTokenizer(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			requests.Add(1)
		}
		io.WriteString(w, `{"data":[{"id":"meta-llama/Llama-3.1-8B-Instruct"}]}`)
	}))
	defer srv.Close()
	args := []string{"bench", "--base-url", srv.URL, "--concurrency", "1", "--repeats", "1", "--max-tokens", "2", "-o", filepath.Join(t.TempDir(), "b")}
	for _, c := range []struct {
		name  string
		setup func()
		want  []string
	}{
		{"offline", func() {}, []string{"no tokenizer.json of model meta-llama/Llama-3.1-8B-Instruct at hand", "HF_HUB_OFFLINE is set",
			"pass --tokenizer PATH (the model's tokenizer.json, or a folder holding one), or --tokenizer usage"}},
		{"gated, no token", func() {
			serveHub(t, map[string][]byte{"meta-llama/Llama-3.1-8B-Instruct": qwenJSON(t)}, map[string]bool{"meta-llama/Llama-3.1-8B-Instruct": true}, "hf_x")
		}, []string{"HTTP 401 (GatedRepo)", "set HF_TOKEN", "--tokenizer usage"}},
	} {
		c.setup()
		code, out, errs := runMain(context.Background(), args...)
		if code != 2 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || requests.Load() != 0 {
			t.Errorf("%s: exit %d, %d requests, stderr %q, stdout %q", c.name, code, requests.Load(), errs, out)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: %q does not say %q", c.name, errs, w)
			}
		}
	}
}

// Where the server offers /tokenize and counts the first prompt otherwise
// than the rehearsal's tokenizer, bench warns in one line and the bundle
// notes it. The runner asks before the load where readiness asks more
// than one answer (--ready models here; bench's default asks nothing more
// than the waves send).
func TestBenchWarnsWhenTokenizeDisagrees(t *testing.T) {
	var asked atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"data":[{"id":"m"}]}`)
		case "/tokenize":
			body, _ := io.ReadAll(r.Body)
			asked.Store(string(body))
			io.WriteString(w, `{"count": 999, "tokens": [], "max_model_len": 4096}`)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n")
		}
	}))
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--model", "m", "--tokenizer", "qwen3",
		"--ready", "models", "--concurrency", "1", "--repeats", "1", "--max-tokens", "2", "--progress", "never", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	body, _ := asked.Load().(string)
	if !strings.Contains(body, `"model":"m"`) || !strings.Contains(body, `"add_special_tokens":false`) || !strings.Contains(body, `"prompt":`) {
		t.Errorf("/tokenize was sent %q", body)
	}
	const want = "the server's /tokenize counts 999 tokens in the first prompt, rehearse's tokenizer "
	if n := strings.Count(errs, want); n != 1 {
		t.Errorf("stderr has the warning %d times:\n%s", n, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, want) }) {
		t.Errorf("notes %q lack the warning", res.Notes)
	}
}

// A Hub that never answers does not hold the command: Ctrl-C while the
// tokenizer is being fetched ends it at once, as an interruption.
func TestBenchInterruptedWhileTheHubIsSilent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // never accepted: the request waits for an answer
	t.Setenv("HF_ENDPOINT", "http://"+ln.Addr().String())
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(300*time.Millisecond, cancel) // as Ctrl-C cancels Main's context
	start := time.Now()
	code, _, errs := runMain(ctx, "bench", "--base-url", "http://127.0.0.1:9", "--model", "org/silent", "-o", filepath.Join(t.TempDir(), "b"))
	if code != exitInterrupted || !strings.Contains(errs, "interrupted while finding the tokenizer") || time.Since(start) > 5*time.Second {
		t.Errorf("exit %d after %v, stderr %q", code, time.Since(start), errs)
	}
}
