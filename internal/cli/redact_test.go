package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
)

// filesContaining lists every file under dir whose bytes contain s.
func filesContaining(t *testing.T, dir, s string) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), s) {
			hits = append(hits, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

// TestPasswordInBaseURLIsNeverWritten: bench's --base-url and a server's
// base_url may carry user:password; the requests use it (as basic auth),
// and no file of the bundle, no progress line and no error shows it.
func TestPasswordInBaseURLIsNeverWritten(t *testing.T) {
	srv, auth := benchServer(t, 3, time.Millisecond)
	withPassword := strings.Replace(srv.URL, "http://", "http://user:s3cret@", 1)
	check := func(what, dir, stdout, stderr string) {
		t.Helper()
		if dir != "" {
			if hits := filesContaining(t, dir, "s3cret"); len(hits) > 0 {
				t.Errorf("%s: the password is in %v", what, hits)
			}
		}
		if strings.Contains(stdout+stderr, "s3cret") {
			t.Errorf("%s: the password is in the output:\n%s\n%s", what, stdout, stderr)
		}
	}

	dir := filepath.Join(t.TempDir(), "bench")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", withPassword, "--concurrency", "2", "--repeats", "1",
		"--max-tokens", "3", "--tokenizer", "usage", "--progress", "always", "-o", dir)
	if code != 0 {
		t.Fatalf("bench: exit %d\n%s\n%s", code, out, errs)
	}
	if auth.Load() != "Basic dXNlcjpzM2NyZXQ=" {
		t.Errorf("the requests did not use the URL's credentials: authorization %q", auth.Load())
	}
	check("bench", dir, out, errs)

	file := filepath.Join(t.TempDir(), "r.yaml")
	yaml := "model: {id: test-model}\ntokenizer: {variant: qwen3}\nservers:\n  - name: remote\n    base_url: " + withPassword + "\n" +
		"workload: {concurrencies: [2], repeats: 1, max_tokens: 3}\nmechanism_check: {concurrency: 2, period: 5ms}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(t.TempDir(), "run")
	code, out, errs = runMain(context.Background(), "run", "-f", file, "-o", dir)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	check("run", dir, out, errs)

	// Failures name the URL too.
	for _, args := range [][]string{
		{"bench", "--base-url", "http://user:s3cret@127.0.0.1:1", "--tokenizer", "usage", "-o", filepath.Join(t.TempDir(), "x")},
		{"bench", "--base-url", "http://user:s3cret@", "-o", filepath.Join(t.TempDir(), "y")},
	} {
		code, out, errs := runMain(context.Background(), args...)
		if code == 0 {
			t.Errorf("%q: exit 0", args)
		}
		check(strings.Join(args, " "), "", out, errs)
	}
}

// echoServer is a server that echoes the bearer token it is sent: every
// third chat request is refused with a 401 whose body names the key, the
// others stream it back, split across two content chunks and in the
// reasoning channel, among plain words.
func echoServer(t *testing.T) *httptest.Server {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if r.URL.Path == "/v1/models" {
			io.WriteString(rw, `{"data":[{"id":"test-model"}]}`)
			return
		}
		io.Copy(io.Discard, r.Body)
		if n.Add(1)%3 == 1 {
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(rw, `{"error":{"message":"Incorrect API key provided: %s","code":"invalid_api_key"}}`, key)
			return
		}
		rw.Header().Set("Content-Type", "text/event-stream")
		half := len(key) / 2
		for _, delta := range []string{
			`{"reasoning_content":"the user sent ` + key + `"}`,
			`{"content":"your key is "}`, `{"content":"` + key[:half] + `"}`, `{"content":"` + key[half:] + ` ok"}`,
		} {
			fmt.Fprintf(rw, "data: {\"choices\":[{\"delta\":%s}]}\n\n", delta)
			http.NewResponseController(rw).Flush()
		}
		io.WriteString(rw, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestEchoedAPIKeyIsNeverWritten: a server that echoes the API key back,
// in a 401's body and in the streamed text and reasoning, leaves it in no
// file of the bundle, no export and no output line; its records say they
// were redacted, their counts are those of the text as it came, and
// verify passes, saying how many records it did not re-count.
func TestEchoedAPIKeyIsNeverWritten(t *testing.T) {
	const key = "sk-echoed-secret-key-0123456789"
	t.Setenv("REHEARSE_ECHO_KEY", key)
	srv := echoServer(t)
	dir := filepath.Join(t.TempDir(), "bench")
	var all strings.Builder
	run := func(want int, args ...string) string {
		t.Helper()
		code, out, errs := runMain(context.Background(), args...)
		all.WriteString(out + errs)
		if code != want {
			t.Fatalf("%q: exit %d, want %d\n%s\n%s", args, code, want, out, errs)
		}
		return out + errs
	}
	tok := byteTokenizer(t)
	run(0, "bench", "--base-url", srv.URL, "--concurrency", "3", "--repeats", "2", "--max-tokens", "8",
		"--api-key-env", "REHEARSE_ECHO_KEY", "--tokenizer", tok, "--progress", "always", "-o", dir)
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	redacted := 0
	for _, r := range res.Records {
		if !r.Redacted {
			t.Errorf("a record not marked redacted: %+v", r)
			continue
		}
		redacted++
		if r.OK && (r.OutputTokens != len("your key is "+key+" ok") || r.ReasoningTokens == nil || *r.ReasoningTokens != len("the user sent "+key)) {
			t.Errorf("counts not of the text as it came: output_tokens %d, reasoning_tokens %v", r.OutputTokens, r.ReasoningTokens)
		}
	}
	verified := run(0, "verify", "--tokenizer", tok, dir)
	if want := fmt.Sprintf("%d redacted records", redacted); !strings.Contains(verified, want) {
		t.Errorf("verify does not say it skipped %q:\n%s", want, verified)
	}
	exports := t.TempDir()
	for _, args := range [][]string{{"csv"}, {"jsonl"}, {"vllm", "--save-detailed"}} {
		run(0, append([]string{"export", dir, "-o", filepath.Join(exports, "out."+args[0]), "--format"}, args...)...)
	}
	for _, d := range []string{dir, exports} {
		if hits := filesContaining(t, d, key); len(hits) > 0 {
			t.Errorf("the API key is in %v", hits)
		}
	}
	// A server that refuses even the model list, echoing the key: bench
	// fails, and its error quotes the body without the key.
	refusing := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(rw, `{"error":{"message":"Incorrect API key provided: %s"}}`, r.Header.Get("Authorization"))
	}))
	defer refusing.Close()
	if out := run(1, "bench", "--base-url", refusing.URL, "--api-key-env", "REHEARSE_ECHO_KEY", "--tokenizer", "usage",
		"-o", filepath.Join(t.TempDir(), "refused")); !strings.Contains(out, "Incorrect API key provided: Bearer [redacted]") {
		t.Errorf("the refusal is not shown, redacted:\n%s", out)
	}
	if strings.Contains(all.String(), key) {
		t.Errorf("the API key is in the output:\n%s", all.String())
	}
}

// TestSecretsInAShellLaunchAreNeverWritten: a server launched through a
// shell string carries its secrets inside one argv item — a variable's
// assignment and flags as --api-key X, --hf-token=X and --admin-key "X" —
// and prints them into its log; none reaches any file of the bundle
// (results.json's launch_argv, README.md, report.html, the server log)
// nor the output, and the launch shown keeps its shape.
func TestSecretsInAShellLaunchAreNeverWritten(t *testing.T) {
	t.Setenv(rehearseMainEnv, "1") // {rehearse} sim runs this binary as rehearse
	secrets := []string{"tok-inside-1", "sk-inside-2", "hf_inside-3", "sk-quoted-4"}
	script := `export FOO_TOKEN=tok-inside-1; serve() { echo "serving: $*"; env | grep FOO_TOKEN; ` +
		`exec "$0" sim --engine batching --port "$PORT" --time-scale 20 --model "$MODEL" --quiet; }; ` +
		`PORT=$1; MODEL=$2; serve --api-key sk-inside-2 --hf-token=hf_inside-3 --admin-key "sk-quoted-4"`
	file := filepath.Join(t.TempDir(), "r.yaml")
	yaml := "model: {id: test-model}\nservers:\n  - name: shell\n    launch: [sh, -c, '" + script + "', '{rehearse}', '{port}', '{model}']\n" +
		"    ready: {timeout: 20s}\n    stop_grace: 3s\nworkload: {concurrencies: [1], repeats: 1, max_tokens: 4}\nmechanism_check: ~\ntokenizer: {variant: usage}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	code, out, errs := runMain(context.Background(), "run", "-f", file, "-o", dir)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	for _, s := range secrets {
		if hits := filesContaining(t, dir, s); len(hits) > 0 {
			t.Errorf("%q is in %v", s, hits)
		}
		if strings.Contains(out+errs, s) {
			t.Errorf("%q is in the output:\n%s\n%s", s, out, errs)
		}
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	shown := res.Servers[0].LaunchArgv[2]
	for _, want := range []string{"export FOO_TOKEN=[redacted];", "--api-key [redacted] --hf-token=[redacted] --admin-key \"[redacted]\""} {
		if !strings.Contains(shown, want) {
			t.Errorf("launch_argv %q lacks %q", shown, want)
		}
	}
	log, err := os.ReadFile(filepath.Join(dir, res.Servers[0].Log))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"serving: --api-key [redacted] --hf-token=[redacted] --admin-key [redacted]", "FOO_TOKEN=[redacted]"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the server log lacks %q:\n%s", want, log)
		}
	}
}
