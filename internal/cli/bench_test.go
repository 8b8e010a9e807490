package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// benchServer streams `tokens` words per request, each `gap` apart, serves
// /v1/models (listing test-model, and m, the name most tests ask for), and
// remembers the last Authorization header.
func benchServer(t *testing.T, tokens int, gap time.Duration) (*httptest.Server, *atomic.Value) {
	t.Helper()
	var auth atomic.Value
	auth.Store("")
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		if r.URL.Path == "/v1/models" {
			io.WriteString(rw, `{"data":[{"id":"test-model"},{"id":"m"}]}`)
			return
		}
		io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(rw)
		for i := range tokens {
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return
			}
			fmt.Fprintf(rw, "data: {\"choices\":[{\"delta\":{\"content\":\"w%d \"}}]}\n\n", i)
			rc.Flush()
		}
		fmt.Fprintf(rw, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"completion_tokens\":%d,\"prompt_tokens\":3}}\n\ndata: [DONE]\n\n", tokens)
	}))
	t.Cleanup(srv.Close)
	return srv, &auth
}

func runMain(ctx context.Context, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(ctx, args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestBenchWritesAVerifiedBundle(t *testing.T) {
	srv, auth := benchServer(t, 4, time.Millisecond)
	dir := filepath.Join(t.TempDir(), "b")
	t.Setenv("REHEARSE_TEST_KEY", "sk-never-stored")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--name", "local",
		"--concurrency", "1,3", "--repeats", "2", "--warmup-waves", "1", "--warmup-concurrency", "2", "--max-tokens", "4",
		"--api-key-env", "REHEARSE_TEST_KEY", "--tokenizer", "usage", "--extra-body", `{"ignore_eos":true}`, "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if auth.Load() != "Bearer sk-never-stored" {
		t.Fatalf("authorization %q", auth.Load())
	}
	for _, want := range []string{"goodput tok/s", "1 client ", "3 clients", "0/6 (0%)", "bundle: " + dir} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(errs, "█") {
		t.Errorf("progress bar drawn on a non-terminal stderr: %q", errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Waves) != 5 || res.Waves[0].Kind != contract.KindWarmup || res.Waves[0].Concurrency != 2 || res.Waves[1].Cold || len(res.Aggregates) != 2 {
		t.Fatalf("waves %+v, %d aggregates", res.Waves, len(res.Aggregates))
	}
	if res.Provenance.OutputTokensSource != "usage" || res.Provenance.Model.ID != "test-model" || res.Servers[0].Name != "local" {
		t.Fatalf("provenance %+v servers %+v", res.Provenance, res.Servers)
	}
	if res.Provenance.StartedAt == "" || res.Provenance.FinishedAt == "" || res.Provenance.Tool.Name != "rehearse" {
		t.Fatalf("provenance %+v", res.Provenance)
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.HasPrefix(n, "load generator: ") }) {
		t.Fatalf("no load-generator note in %q", res.Notes)
	}
	if res.Workload.ExtraBody["ignore_eos"] != true || len(res.Workload.Prompts) != 8 {
		t.Fatalf("workload %+v", res.Workload)
	}
	for _, r := range res.Records {
		if !r.OK || r.OutputTokens != 4 {
			t.Fatalf("record %+v", r)
		}
	}
	files, _ := bundletest.Files(dir)
	for _, f := range files {
		data, _ := os.ReadFile(filepath.Join(dir, f))
		if bytes.Contains(data, []byte("sk-never-stored")) {
			t.Fatalf("%s holds the API key", f)
		}
	}
	for _, f := range []string{bundle.ResultsFile, bundle.JournalFile, bundle.SumsFile, bundle.ReadmeFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("bundle lacks %s", f)
		}
	}
	if code, out, errs := runMain(context.Background(), "verify", dir); code != 0 {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--model", "m", "--tokenizer", "usage", "-o", dir); code == 0 || !strings.Contains(errs, "already holds a bundle") {
		t.Fatalf("second bench into the same dir: exit %d %s", code, errs)
	}
}

func TestBenchOpenLoopOnly(t *testing.T) {
	srv, _ := benchServer(t, 2, time.Millisecond)
	dir := filepath.Join(t.TempDir(), "b")
	tokPath := byteTokenizer(t)
	code, out, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--model", "m", "--tokenizer", tokPath,
		"--request-rate", "100", "--arrival", "fixed", "--num-requests", "6", "--repeats", "1", "--max-concurrency", "4", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Waves) != 1 || res.Waves[0].Mode != contract.ModeOpen || len(res.Records) != 6 || res.Workload.Kind != contract.ModeOpen {
		t.Fatalf("waves %+v records %d kind %s", res.Waves, len(res.Records), res.Workload.Kind)
	}
	a := res.Aggregates[0]
	if a.Lateness == nil || a.Lateness.N != 6 || !strings.Contains(out, "100 req/s") {
		t.Fatalf("aggregate %+v\n%s", a, out)
	}
	if want := len(res.Records[0].Text); res.Provenance.OutputTokensSource != "tokenizer" || res.Provenance.Tokenizer.Source != tokPath || res.Records[0].OutputTokens != want || want == 2 {
		// The text re-tokenized, not the usage count (2).
		t.Fatalf("tokenizer %+v, output_tokens %d", res.Provenance.Tokenizer, res.Records[0].OutputTokens)
	}
}

func TestBenchCtrlCWritesWhatFinished(t *testing.T) {
	srv, _ := benchServer(t, 1000, 10*time.Millisecond)
	dir := filepath.Join(t.TempDir(), "b")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	code, _, errs := runMain(ctx, "bench", "--base-url", srv.URL, "--model", "m", "--tokenizer", "usage", "--concurrency", "2", "-o", dir)
	if code != 130 || !strings.Contains(errs, "stopped") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Waves) != 1 || !strings.HasPrefix(res.Waves[0].Stopped, "canceled") || len(res.Records) != 2 {
		t.Fatalf("waves %+v, %d records", res.Waves, len(res.Records))
	}
	for _, r := range res.Records {
		if r.ErrorKind != contract.ErrCanceled || r.FirstContentS == nil {
			t.Fatalf("record %+v", r)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, bundle.SumsFile)); err != nil {
		t.Fatal("no SHA256SUMS after Ctrl-C")
	}
}

func TestBenchFlagErrors(t *testing.T) {
	t.Setenv("REHEARSE_UNSET_FOR_TEST", "")
	os.Unsetenv("REHEARSE_UNSET_FOR_TEST")
	t.Setenv("REHEARSE_EMPTY_FOR_TEST", "")
	cases := []struct {
		args []string
		want string
	}{
		{nil, "--base-url is required"},
		{[]string{"--base-url", "localhost:8000"}, `--base-url: "localhost:8000" is not an http(s) URL`},
		{[]string{"--base-url", "http://x", "--concurrency", "0"}, "--concurrency: 0: must be at least 1"},
		{[]string{"--base-url", "http://x", "--concurrency", "8,8"}, "--concurrency: 8 appears twice"},
		{[]string{"--base-url", "http://x", "--api-key-env", "REHEARSE_EMPTY_FOR_TEST"}, "--api-key-env REHEARSE_EMPTY_FOR_TEST: the variable is empty"},
		{[]string{"--base-url", "http://x", "--repeats", "0"}, "--repeats: 0: must be at least 1"},
		{[]string{"--base-url", "http://x", "--max-tokens", "0"}, "--max-tokens: 0: must be at least 1"},
		{[]string{"--base-url", "http://x", "--timeout", "0s"}, "--timeout: 0s: must be positive"},
		{[]string{"--base-url", "http://x", "--endpoint", "v1"}, `--endpoint: "v1" must start with /`},
		{[]string{"--base-url", "http://x", "--api-key-env", "REHEARSE_UNSET_FOR_TEST"}, "REHEARSE_UNSET_FOR_TEST: the variable is not set"},
		{[]string{"--base-url", "http://x", "--request-rate", "5", "--num-prompts", "0"}, "--request-rate: needs num_requests or duration"},
		{[]string{"--base-url", "http://x", "--request-rate", "5", "--duration", "1s", "--arrival", "bursty"}, `--arrival: "bursty": want one of`},
		{[]string{"--base-url", "http://x", "--request-rate", "-1", "--duration", "1s"}, "--request-rate: -1: must be positive"},
		{[]string{"--base-url", "http://x", "--duration", "10s"}, "--duration applies to open-loop waves"},
		{[]string{"--base-url", "http://x", "--model", "m", "--extra-body", "[1]"}, "--extra-body"},
		{[]string{"--base-url", "http://x", "--model", "m", "--extra-body", `{"stream":false}`}, `"stream" is set by rehearse`},
		{[]string{"--base-url", "http://x", "--model", "m", "--extra-body", `{"max_tokens":9}`}, `--extra-body: "max_tokens" is set by rehearse and cannot be overridden (set workload.max_tokens (--max-tokens) instead)`},
		{[]string{"--base-url", "http://x", "--model", "m", "--tokenizer", "qwen3", "--prompts", "/nonexistent/p.txt"}, "--prompts: /nonexistent/p.txt: no such file"},
		{[]string{"--base-url", "http://x", "--model", "m", "--tokenizer", "nope"}, `--tokenizer "nope"`},
		{[]string{"--base-url", "http://x", "--progress", "sometimes"}, `--progress "sometimes"`},
		{[]string{"--base-url", "http://x", "--request-rate", "inf", "--duration", "1s"}, "--request-rate inf without --max-concurrency sends every request at once: --duration does not apply"},
		{[]string{"--base-url", "http://x", "--request-rate", "inf,4", "--max-concurrency", "2"}, "give it alone"},
		{[]string{"--base-url", "http://x", "--request-rate", "inf", "--max-concurrency", "2", "--concurrency", "4"}, "--concurrency does not apply with --request-rate inf"},
		{[]string{"--base-url", "http://x", "--request-rate", "inf", "--max-concurrency", "2", "--arrival", "gamma"}, "--arrival applies to open-loop arrivals"},
		{[]string{"--base-url", "http://x", "--request-rate", "inf", "--max-concurrency", "2", "--warmup-requests", "-1"}, "--warmup-requests: -1: must be 0 or more"},
		{[]string{"--base-url", "http://x", "--warmup-requests", "4"}, "--warmup-requests applies to the sustained closed loop"},
		{[]string{"--base-url", "http://x", "--request-rate", "4", "--duration", "1s", "--warmup-requests", "4"}, "--warmup-requests applies to the sustained closed loop"},
	}
	for _, c := range cases {
		code, _, errs := runMain(context.Background(), append([]string{"bench"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", c.args, code, errs, c.want)
		}
	}
}

// byteTokenizer writes a byte-level BPE tokenizer.json with no merges, so
// every byte is one token: small and quick to load, unlike the Qwen file.
func byteTokenizer(t *testing.T) string {
	t.Helper()
	vocab := map[string]int{}
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF) {
			r = rune(256 + n)
			n++
		}
		vocab[string(r)] = b
	}
	doc := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": []any{},
		"normalizer":     nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"post_processor": nil,
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model":          map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": []any{}},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := tokenizer.Load(path); err != nil {
		t.Fatalf("test tokenizer: %v", err)
	}
	return path
}

func TestBenchProgressBar(t *testing.T) {
	srv, _ := benchServer(t, 3, time.Millisecond)
	dir := filepath.Join(t.TempDir(), "b")
	code, _, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--model", "m", "--tokenizer", "usage",
		"--concurrency", "4", "--repeats", "2", "--progress", "always", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"server recorded c=4 r=1", "server recorded c=4 r=2 failed 0", "(4/4)"} {
		if !strings.Contains(errs, want) {
			t.Errorf("progress output lacks %q:\n%q", want, errs)
		}
	}
}

func TestBenchCanceledBeforeAnyWave(t *testing.T) {
	srv, _ := benchServer(t, 3, time.Millisecond)
	dir := filepath.Join(t.TempDir(), "b")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code, _, errs := runMain(ctx, "bench", "--base-url", srv.URL, "--model", "m", "--tokenizer", "usage", "-o", dir)
	if code != 130 || !strings.Contains(errs, "not released") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil || len(res.Waves) != 0 || len(res.Records) != 0 {
		t.Fatalf("%v %+v", err, res)
	}
}

// --follow-redirects follows a 307 to another host; without it the 307 is
// every request's outcome.
func TestBenchFollowRedirectsFlag(t *testing.T) {
	srv, _ := benchServer(t, 2, time.Millisecond)
	redirect := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		http.Redirect(rw, r, srv.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	for _, follow := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "b")
		args := []string{"bench", "--base-url", redirect.URL, "--model", "m", "--tokenizer", "usage", "--concurrency", "2", "--repeats", "1", "--max-tokens", "2", "-o", dir}
		if follow {
			args = append(args, "--follow-redirects")
		}
		// Without --follow-redirects no request succeeds: exit 1, in one line.
		code, out, errs := runMain(context.Background(), args...)
		if wantCode := map[bool]int{true: 0, false: 1}[follow]; code != wantCode || (!follow && !strings.Contains(errs, "no request succeeded: all 2 recorded requests failed (http_status 2)")) {
			t.Fatalf("exit %d, want %d\n%s\n%s", code, wantCode, out, errs)
		}
		res, err := bundle.ReadResults(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Records {
			if r.OK != follow || (!follow && r.HTTPStatus != 307) {
				t.Fatalf("--follow-redirects=%v: ok=%v %q %d %q", follow, r.OK, r.ErrorKind, r.HTTPStatus, r.Error)
			}
		}
	}
}

// A bench in which no request succeeds exits 1 and says so in one line, so
// CI does not go green: a 404 endpoint (every request fails), a closed port
// (not ready, at once).
func TestBenchWithNoSuccessExitsOne(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "b")
	code, _, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--model", "m", "--tokenizer", "usage",
		"--concurrency", "2", "--repeats", "1", "-o", dir)
	if code != 1 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "no request succeeded: all 2 recorded requests failed (http_status 2)") {
		t.Fatalf("404 endpoint: exit %d, stderr %q", code, errs)
	}
	if _, err := bundle.ReadResults(dir); err != nil {
		t.Fatalf("no bundle of the failures: %v", err)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	code, _, errs = runMain(context.Background(), "bench", "--base-url", closed.URL, "--model", "m", "--tokenizer", "usage",
		"--concurrency", "1", "--repeats", "1", "--ready-timeout", "300ms", "-o", filepath.Join(t.TempDir(), "c"))
	if code != 1 || !strings.Contains(errs, "not ready") {
		t.Fatalf("closed port: exit %d, stderr %q", code, errs)
	}
	// Without --model the server is asked for it first: a server that is
	// down is the work failing (1), not bad usage (2).
	code, _, errs = runMain(context.Background(), "bench", "--base-url", closed.URL, "--tokenizer", "usage",
		"--concurrency", "1", "--repeats", "1", "-o", filepath.Join(t.TempDir(), "d"))
	if code != 1 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "--model not given, and the server did not name one") {
		t.Fatalf("closed port, no --model: exit %d, stderr %q", code, errs)
	}
}

// run goes through the same exit rule: a rehearsal file whose only server
// answers every request 404 exits 1, in one line after the progress.
func TestRunWithNoSuccessExitsOne(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "r.yaml")
	yaml := "model: {id: m}\nservers:\n  - {name: s, base_url: '" + srv.URL + "', ready: {mode: answer, timeout: 2s}}\n" +
		"workload: {concurrencies: [2], repeats: 1, max_tokens: 2}\nmechanism_check: ~\ntokenizer: {variant: usage}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runMain(context.Background(), "run", "-q", "-f", file, "-o", filepath.Join(dir, "out"))
	if code != 1 || !strings.HasSuffix(errs, "no request succeeded: all 2 recorded requests failed (http_status 2); the bundle in "+filepath.Join(dir, "out")+" says how\n") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

// run (and demo, which goes through it) draws the same live view as bench:
// a bar per wave advanced as requests end, cleared when the wave's own line
// replaces it.
func TestRunProgressBar(t *testing.T) {
	srv, _ := benchServer(t, 10, 30*time.Millisecond)
	dir := t.TempDir()
	file := filepath.Join(dir, "r.yaml")
	yaml := "model: {id: m}\nservers:\n  - {name: s, base_url: '" + srv.URL + "', ready: {mode: answer, timeout: 2s}}\n" +
		"workload: {concurrencies: [2], repeats: 1, max_tokens: 10}\nmechanism_check: ~\ntokenizer: {variant: usage}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runMain(context.Background(), "run", "--progress", "always", "-f", file, "-o", filepath.Join(dir, "out"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"s recorded c=2 r=1", "recorded wave at 2 clients, repeat 1: 2/2 ok"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%q", want, errs)
		}
	}
	code, _, errs = runMain(context.Background(), "run", "--progress", "sometimes", "-f", file, "-o", filepath.Join(dir, "out2"))
	if code != 2 || !strings.Contains(errs, `--progress "sometimes"`) {
		t.Fatalf("bad --progress: exit %d, stderr %q", code, errs)
	}
}

// TestBenchSustained: --request-rate inf --max-concurrency C is the
// sustained closed loop at C, bounded by --num-requests, after
// --warmup-requests of warm-up kept out of the figures.
func TestBenchSustained(t *testing.T) {
	srv, _ := benchServer(t, 2, time.Millisecond)
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--model", "m", "--tokenizer", "usage",
		"--request-rate", "inf", "--max-concurrency", "3", "--num-requests", "10", "--warmup-requests", "4", "--repeats", "2", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Workload.Sustained; res.Workload.Kind != contract.ModeSustained || s == nil || s.NumRequests != 10 || s.WarmupRequests != 4 {
		t.Fatalf("workload %+v", res.Workload)
	}
	kinds := map[string]int{}
	for _, w := range res.Waves {
		if w.Mode != contract.ModeSustained || w.Concurrency != 3 {
			t.Errorf("wave %+v", w)
		}
		kinds[w.Kind]++
	}
	if kinds[contract.KindWarmup] != 2 || kinds[contract.KindRecorded] != 2 || len(res.Records) != 2*(10+4) {
		t.Fatalf("waves %v, %d records", kinds, len(res.Records))
	}
	if len(res.Aggregates) != 1 || res.Aggregates[0].Failures.Total != 20 || !strings.Contains(out, "3 clients, sustained") {
		t.Fatalf("aggregates %+v\n%s", res.Aggregates, out)
	}
}

// TestBenchAndFileShareOneValidation holds bench's flags and a rehearsal
// file to one rule: the same bad value gets the same message from
// config.Rehearsal.Validate, named by the flag on a command line and by
// the field path in a file.
func TestBenchAndFileShareOneValidation(t *testing.T) {
	const head = "servers:\n  - {name: s, base_url: \"http://127.0.0.1:9\", model: m}\nworkload:\n"
	cases := []struct {
		flags      []string
		yaml, path string
	}{
		{[]string{"--max-tokens", "-1"}, "  concurrencies: [1]\n  max_tokens: -1\n", "workload.max_tokens"},
		{[]string{"--repeats", "-2"}, "  concurrencies: [1]\n  repeats: -2\n", "workload.repeats"},
		{[]string{"--concurrency", "4,4"}, "  concurrencies: [4, 4]\n", "workload.concurrencies[1]"},
		{[]string{"--endpoint", "v1"}, "  concurrencies: [1]\n  endpoint: v1\n", "workload.endpoint"},
		{[]string{"--request-rate", "-1", "--duration", "1s"}, "  open_loop: {request_rates_rps: [-1], duration: 1s}\n", "workload.open_loop.request_rates_rps[0]"},
	}
	for _, c := range cases {
		_, err := config.Parse([]byte(head+c.yaml), "r.yaml", t.TempDir())
		var probs *config.Problems
		if !errors.As(err, &probs) {
			t.Fatalf("%s: %v, want problems", c.path, err)
		}
		var msg string
		for _, p := range probs.Items {
			if p.Path == c.path {
				msg = p.Msg
			}
		}
		if msg == "" {
			t.Fatalf("%s: no problem at that path in %v", c.path, err)
		}
		args := append([]string{"bench", "--base-url", "http://127.0.0.1:9", "--model", "m", "--tokenizer", "qwen3"}, c.flags...)
		code, _, stderr := runMain(context.Background(), args...)
		if want := c.flags[0] + ": " + msg; code != 2 || strings.TrimSpace(stderr) != "rehearse: "+want {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q (the file's rule)", c.flags, code, stderr, want)
		}
	}
}
