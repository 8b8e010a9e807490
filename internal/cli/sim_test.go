package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/sim/engine"
)

// lockedBuffer is a bytes.Buffer safe for a server's concurrent log writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startSim runs "rehearse sim ARGS --port 0 --port-file F" in-process and
// returns its base URL, its stderr, a stop function and its exit code.
func startSim(t *testing.T, args ...string) (url string, stderr *lockedBuffer, stop func() int) {
	t.Helper()
	portFile := filepath.Join(t.TempDir(), "port")
	ctx, cancel := context.WithCancel(context.Background())
	stderr = &lockedBuffer{}
	code := make(chan int, 1)
	args = append([]string{"sim", "--port", "0", "--port-file", portFile}, args...)
	go func() { code <- Main(ctx, args, strings.NewReader(""), io.Discard, stderr) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(portFile)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			url = "http://127.0.0.1:" + strings.TrimSpace(string(b))
			break
		}
		select {
		case c := <-code:
			t.Fatalf("rehearse sim exited with %d before listening: %s", c, stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("rehearse sim did not write its port: %s", stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var once sync.Once
	var exit int
	stop = func() int {
		once.Do(func() {
			cancel()
			select {
			case exit = <-code:
			case <-time.After(10 * time.Second):
				t.Fatal("rehearse sim did not stop within 10 s of its context ending")
			}
		})
		return exit
	}
	t.Cleanup(func() { stop() })
	return url, stderr, stop
}

func TestSimCommandServesAndStops(t *testing.T) {
	url, stderr, stop := startSim(t, "--engine", "serial", "--time-scale", "1000", "--seed", "3")
	if !regexp.MustCompile(`(?m) listening on 127\.0\.0\.1:\d+$`).MatchString(stderr.String()) {
		t.Errorf("no \"listening on 127.0.0.1:PORT\" line on stderr: %q", stderr)
	}
	resp, err := http.Get(url + "/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/health: %v, %v", resp, err)
	}
	resp.Body.Close()
	body := `{"messages":[{"role":"user","content":"hello"}],"max_tokens":12,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`
	resp, err = http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := strings.Count(string(b), `"delta":{"content":`); n != 12 || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Errorf("stream had %d content chunks, want 12, ending in [DONE]: %q", n, b)
	}
	resp, err = http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `vllm:generation_tokens_total{model_name="Qwen/Qwen2.5-1.5B-Instruct",engine="0"} 12`) {
		t.Errorf("/metrics lacks the generated tokens: %s", b)
	}
	if code := stop(); code != 0 {
		t.Errorf("exit code %d after the context ended, want 0", code)
	}
	log := stderr.String()
	for _, want := range []string{
		"rehearse sim: engine serial, profile t4-qwen2.5-1.5b-serial (builtin:t4-qwen2.5-1.5b-serial)",
		"POST /v1/chat/completions 200 id=chatcmpl-sim-1 stream prompt_tokens=",
		"completion_tokens=12 finish=length",
		"rehearse sim: stopped",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("stderr lacks %q:\n%s", want, log)
		}
	}
}

// TestSimCommandPrefixCaching: --prefix-caching on makes a repeated prompt
// hit the cache, counted on /metrics; the default for the built-in profile
// is off.
func TestSimCommandPrefixCaching(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		caching string
		hits    bool
	}{
		{[]string{"--prefix-caching", "on"}, "on", true},
		{nil, "off", false},
	} {
		url, stderr, stop := startSim(t, append([]string{"--time-scale", "1000", "--quiet"}, tc.args...)...)
		body := `{"messages":[{"role":"user","content":"` + strings.Repeat("a shared document of some length ", 20) + `"}],"max_tokens":2,"ignore_eos":true}`
		for range 2 {
			resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		hits := regexp.MustCompile(`(?m)^vllm:prefix_cache_hits_total\{[^}]*\} (\d+)$`).FindStringSubmatch(string(b))
		if hits == nil {
			t.Fatalf("%v: /metrics has no vllm:prefix_cache_hits_total: %s", tc.args, b)
		}
		if got := hits[1] != "0"; got != tc.hits {
			t.Errorf("%v: prefix cache hits %s after a repeated prompt", tc.args, hits[1])
		}
		if code := stop(); code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
		if want := "prefix caching " + tc.caching; !strings.Contains(stderr.String(), want) {
			t.Errorf("%v: stderr lacks %q:\n%s", tc.args, want, stderr)
		}
	}
}

func TestSimCommandEngineFollowsProfile(t *testing.T) {
	_, stderr, _ := startSim(t, "--profile", "t4-qwen2.5-1.5b-serial", "--time-scale", "1000")
	if !strings.Contains(stderr.String(), "engine serial, profile t4-qwen2.5-1.5b-serial") {
		t.Errorf("--profile of a serial engine without --engine: %q", stderr)
	}
}

func TestSimCommandStopAbortsStreams(t *testing.T) {
	url, _, stop := startSim(t, "--engine", "batching", "--time-scale", "1")
	done := make(chan string, 1)
	go func() {
		body := `{"messages":[{"role":"user","content":"long"}],"max_tokens":1000,"ignore_eos":true,"stream":true}`
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- string(b)
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if code := stop(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("stopping with a stream in flight took %v", d)
	}
	if got := <-done; !strings.Contains(got, `"error"`) || strings.Contains(got, "finish_reason\":\"length") {
		t.Errorf("the stream in flight ended with %q; want an error event and no finish", got)
	}
}

func TestSimCommandCrashFaultExits3(t *testing.T) {
	var code atomic.Int32
	old := crashExit
	crashExit = func(c int) { code.Store(int32(c)) }
	t.Cleanup(func() { crashExit = old })
	url, stderr, _ := startSim(t, "--fault", "crash:1", "--time-scale", "1000")
	body := `{"messages":[{"role":"user","content":"x"}],"max_tokens":10,"ignore_eos":true,"stream":true}`
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Error("the crash fault did not drop the connection")
	}
	if code.Load() != 3 || !strings.Contains(stderr.String(), "crash fault: exiting with status 3") {
		t.Errorf("crash exit code %d, stderr %q; want 3 and a log line", code.Load(), stderr)
	}
}

func TestSimCommandBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--engine", "turbo"}, `--engine "turbo"`},
		{[]string{"--fault", "boom:0.1"}, `unknown kind "boom"`},
		{[]string{"--fault", "stall:2"}, `rate "2" is not a probability`},
		{[]string{"--time-scale", "0"}, "--time-scale 0"},
		{[]string{"--port", "70000"}, "--port 70000"},
		{[]string{"--profile", "no-such-profile"}, `"no-such-profile" is neither a built-in profile`},
		{[]string{"--engine", "serial", "--profile", "t4-qwen2.5-1.5b-batching"}, "fitted for the batching engine"},
		{[]string{"--engine", "serial", "--max-num-seqs", "4"}, "max_num_seqs 4 is not 1"},
		{[]string{"--idle-timeout", "-1s"}, "--idle-timeout -1s"},
		{[]string{"--prefix-caching", "yes"}, `--prefix-caching "yes": want on or off`},
		{[]string{"--reasoning-tokens", "-3"}, "--reasoning-tokens -3"},
		{[]string{"--reasoning-field", "thinking"}, `--reasoning-field "thinking": want reasoning or reasoning_content`},
		{[]string{"stray"}, "unknown command"},
	} {
		code, _, stderr := run(t, append([]string{"sim"}, tc.args...)...)
		if code != 2 && !(tc.args[0] == "stray" && code != 0) {
			t.Errorf("sim %v: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("sim %v: stderr %q, want one line containing %q", tc.args, stderr, tc.want)
		}
	}
}

func TestSimCommandListsProfilesAndBadProfileFile(t *testing.T) {
	code, out, _ := run(t, "sim", "--list-profiles")
	if code != 0 || !strings.Contains(out, "t4-qwen2.5-1.5b-serial") || !strings.Contains(out, "t4-qwen2.5-1.5b-batching") {
		t.Errorf("--list-profiles: code %d, out %q", code, out)
	}
	bad := filepath.Join(t.TempDir(), "p.json")
	os.WriteFile(bad, []byte(`{"name":"x","engine":"batching","model":"m","max_model_len":100,"chat_template":"chatml","decode_step_s":[[1,0.01]],"max_num_seqs":0,"kv_token_budget":10,"output_tokens":[5]}`), 0o644)
	code, _, stderr := run(t, "sim", "--profile", bad)
	if code != 2 || !strings.Contains(stderr, bad) || !strings.Contains(stderr, "max_num_seqs = 0") {
		t.Errorf("bad profile file: code %d, stderr %q; want 2 naming the file and the field", code, stderr)
	}
}

func TestSimCommandPortTaken(t *testing.T) {
	url, _, _ := startSim(t, "--time-scale", "1000")
	port := url[strings.LastIndex(url, ":")+1:]
	code, _, stderr := run(t, "sim", "--port", port)
	if code != 1 || !strings.Contains(stderr, "listen on 127.0.0.1:"+port) || !strings.Contains(stderr, "address already in use") {
		t.Errorf("port taken: exit %d, stderr %q; want 1 naming the address", code, stderr)
	}
}

// h200Bundle is the committed H200 rehearsal, from this package's folder.
var h200Bundle = filepath.Join("..", "..", "rehearsals", "h200-qwen2.5-1.5b")

func TestSimFitWritesTheProfileAndTheHeldOutTable(t *testing.T) {
	out := filepath.Join(t.TempDir(), "batching.json")
	code, stdout, stderr := run(t, "sim", "fit", "--bundle", h200Bundle, "--server", "batching", "--engine", "batching",
		"--fit-concurrencies", "1,64", "--name", "h200-qwen2.5-1.5b-transformers-batching", "-o", out, "--markdown")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"| clients | waves | goodput tok/s, measured | predicted | error | p95 TTFT, measured |",
		"| 1 | fitted | 48.3 [48.2–48.4] |",
		"| 8 | held out | 359.3 [348.9–360.0] |",
		"| 32 | held out | 1244.3 [1224.0–1249.0] |",
		"| 64 | fitted | 1981.1 [1960.4–2016.3] |",
		"- max_num_seqs: 64, from the server's launch argv",
		"What the fitted model does not explain:",
		"written to " + out,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	got, err := engine.LoadProfile(out)
	if err != nil {
		t.Fatal(err)
	}
	builtin, err := engine.BuiltinProfile("h200-qwen2.5-1.5b-transformers-batching")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.DecodeStepS, builtin.DecodeStepS) || got.FrontendSPerRequest != builtin.FrontendSPerRequest || got.MaxNumSeqs != builtin.MaxNumSeqs {
		t.Errorf("written profile %+v, want the built-in one's figures %+v", got, builtin)
	}
	// The written profile serves.
	url, _, _ := startSim(t, "--profile", out, "--time-scale", "1000")
	resp, err := http.Get(url + "/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("rehearse sim --profile %s: /health %v %v", out, resp, err)
	}
	resp.Body.Close()
}

func TestSimFitPrintsTextWithoutWriting(t *testing.T) {
	code, stdout, stderr := run(t, "sim", "fit", "--bundle", h200Bundle, "--server", "naive", "--engine", "serial")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"not written (pass -o FILE)", "not explained: the per-token cost differs", "held out", "55/96", "decode step (batch 1):"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

func TestSimFitBadInput(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--server", "naive", "--engine", "serial"}, "--bundle is required"},
		{[]string{"--bundle", h200Bundle, "--engine", "serial"}, "--server is required"},
		{[]string{"--bundle", h200Bundle, "--server", "naive", "--engine", "paged"}, `--engine "paged"`},
		{[]string{"--bundle", h200Bundle, "--server", "naive", "--engine", "serial", "--fit-concurrencies", "0"}, "--fit-concurrencies: 0 is not a concurrency"},
		{[]string{"--bundle", h200Bundle, "--server", "naive", "--engine", "serial", "--fit-concurrencies", "one"}, "--fit-concurrencies"},
		{[]string{"--bundle", h200Bundle, "--server", "vllm", "--engine", "serial"}, `no server "vllm" (have: naive, batching)`},
		{[]string{"--bundle", h200Bundle, "--server", "naive", "--engine", "serial", "--fit-concurrencies", "1,16"}, "no recorded closed-loop wave at 16 clients"},
		{[]string{"--bundle", missing, "--server", "naive", "--engine", "serial"}, "no such bundle directory"},
	} {
		code, _, stderr := run(t, append([]string{"sim", "fit"}, tc.args...)...)
		if code != 2 {
			t.Errorf("sim fit %v: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("sim fit %v: stderr %q, want one line containing %q", tc.args, stderr, tc.want)
		}
	}
}
