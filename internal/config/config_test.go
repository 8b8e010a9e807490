package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/secret"
)

const seedYAML = `
model: {id: Qwen/Qwen2.5-1.5B-Instruct, revision: 989aa7980e4cf806f80c7fef2b1adb7bc71aa306, dtype: float16}
servers:
  - name: naive
    launch: [python3, naive_server.py, --port, "{port}"]
    port: 8001
  - name: vllm
    launch: [vllm, serve, "{model}", --revision, "{revision}", --port, "{port}"]
    env: {HF_TOKEN: hf_abc, CUDA_VISIBLE_DEVICES: 0}
`

func TestDefaultsMakeTheSeedShort(t *testing.T) {
	r, err := Parse([]byte(seedYAML), "seed.yaml", "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	if r.Baseline != "naive" {
		t.Errorf("baseline = %q, want the first server", r.Baseline)
	}
	w := r.Workload
	if !slices.Equal(w.Concurrencies, []int{1, 8, 32, 64}) || w.Repeats != 3 || w.MaxTokens != 128 ||
		*w.Temperature != 0 || w.Timeout.D() != 60*time.Second || w.Endpoint != "/v1/chat/completions" || !*w.IncludeUsage {
		t.Errorf("workload defaults wrong: %+v", w)
	}
	m := r.MechanismCheck
	if m == nil || m.Server != "vllm" || m.Concurrency != 64 || m.Metric != "vllm:num_requests_running" || m.Period.D() != 100*time.Millisecond {
		t.Fatalf("mechanism check defaults wrong: %+v", m)
	}
	s := r.Servers[1]
	if s.Ready.Path != "/health" || s.Ready.Timeout.D() != 10*time.Minute || s.Metrics.Path != "/metrics" || s.Model != "Qwen/Qwen2.5-1.5B-Instruct" {
		t.Errorf("server defaults wrong: %+v", s)
	}
	if s.Env["CUDA_VISIBLE_DEVICES"] != "0" {
		t.Errorf("numeric env value not kept as a string: %q", s.Env["CUDA_VISIBLE_DEVICES"])
	}
	argv := r.Argv(s, 8123, "/bin/rehearse")
	want := []string{"vllm", "serve", "Qwen/Qwen2.5-1.5B-Instruct", "--revision", "989aa7980e4cf806f80c7fef2b1adb7bc71aa306", "--port", "8123"}
	if !slices.Equal(argv, want) {
		t.Errorf("argv = %q, want %q", argv, want)
	}
	if r.OnServerFailure != "continue" {
		t.Errorf("on_server_failure = %q", r.OnServerFailure)
	}
}

func TestBadFileReportsEveryProblem(t *testing.T) {
	bad := `
baseline: nobody
servers:
  - name: a
    launch: [x]
  - name: b
    launch: []
    ready: {path: health}
  - name: a
    base_url: ftp://x
    launch: [y]
    colour: blue
workload:
  concurrencies: [1, 0, 1]
  repeats: 0
  timeout: soon
  open_loop: {arrival: lumpy, request_rates_rps: [2]}
on_server_failure: panic
`
	_, err := Parse([]byte(bad), "bad.yaml", t.TempDir())
	var p *Problems
	if !errors.As(err, &p) {
		t.Fatalf("want *Problems, got %v", err)
	}
	// Shape problems (unknown keys, wrong kinds) come first, and the rest
	// of the file is still checked, so every problem comes out at once.
	if len(p.Items) < 3 || !strings.HasPrefix(p.Items[0].String(), "servers[2].colour: unknown key") ||
		!strings.HasPrefix(p.Items[1].String(), "workload.timeout: \"soon\" is not a duration") ||
		!strings.Contains(err.Error(), "servers[1].launch: empty") {
		t.Errorf("want the shape problems first and the semantic ones after, got:\n%v", err)
	}

	// With the shape fixed, every semantic problem comes out at once.
	fixed := strings.Replace(strings.Replace(bad, "    colour: blue\n", "", 1), "timeout: soon", "timeout: 5s", 1)
	_, err = Parse([]byte(fixed), "bad.yaml", t.TempDir())
	if !errors.As(err, &p) {
		t.Fatalf("want *Problems, got %v", err)
	}
	for _, want := range []string{
		"servers[1].launch: empty",
		"servers[1].ready.path: \"health\" must start with /",
		"servers[2].name: \"a\" already names servers[0]",
		"servers[2].base_url: \"ftp://x\" is not an http(s) URL",
		"servers[2].port: 0, but base_url is given",
		"servers[0].launch: no {port} placeholder (in launch or env) and no port",
		"baseline: \"nobody\" names no server",
		"workload.concurrencies[1]: 0: must be at least 1",
		"workload.concurrencies[2]: 1 appears twice",
		"workload.open_loop.arrival: \"lumpy\"",
		"workload.open_loop: needs num_requests or duration",
		"on_server_failure: \"panic\"",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if !strings.HasPrefix(err.Error(), "bad.yaml: ") {
		t.Errorf("error does not name the file: %v", err)
	}
}

func TestRepeatsZeroIsDefaultedButNegativeIsNot(t *testing.T) {
	_, err := Parse([]byte("servers: [{name: s, base_url: 'http://127.0.0.1:1'}]\nmodel: {id: m}\nworkload: {repeats: -1}\n"), "x.yaml", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "workload.repeats: -1") {
		t.Fatalf("got %v", err)
	}
}

func TestShapeErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"", "empty rehearsal file"},
		{"servers: 3", "servers: want a list, got 3"},
		{"servers: [{name: s, launch: x}]", "servers[0].launch: want a list"},
		{"servers: [{name: s, launch: [x], port: eight}]", "servers[0].port: want a whole number"},
		{"servers: [{name: s, launch: [x]}]\nworkload: {include_usage: maybe}", "workload.include_usage: want true or false"},
		{"servers: [{name: s, launch: [x], env: {A: [1]}}]", "servers[0].env.A: want a plain value"},
		{"workload: {prompts: 3}\nservers: []", "workload.prompts: want a file name, a list of prompts or a mapping"},
		{"servers: [{name: s, launch: [x]]", "not valid YAML"},
		{"sever: []", "sever: unknown key"},
	} {
		_, err := Parse([]byte(c.yaml), "t.yaml", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.yaml, err, c.want)
		}
	}
}

func TestRelativePathsAndPromptsFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "r.yaml")
	if err := os.WriteFile(path, []byte("model: {id: m}\nservers: [{name: s, launch: [x, '{port}']}]\nworkload: {prompts: p.txt}\noutput: {dir: out}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Workload.Prompts.File != filepath.Join(dir, "p.txt") || r.Output.Dir != filepath.Join(dir, "out") {
		t.Errorf("relative paths not resolved: %+v %+v", r.Workload.Prompts, r.Output)
	}
	if r.MechanismCheck == nil || r.MechanismCheck.Server != "s" {
		t.Errorf("one server: the mechanism check should run on it: %+v", r.MechanismCheck)
	}
	_, err = Parse([]byte("model: {id: m}\nservers: [{name: s, launch: [x, '{port}']}]\nworkload: {prompts: missing.txt}\n"), "r.yaml", dir)
	if err == nil || !strings.Contains(err.Error(), "workload.prompts: ") || !strings.Contains(err.Error(), "missing.txt: no such file") {
		t.Errorf("missing prompts file: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "nope.yaml")); err == nil || !strings.Contains(err.Error(), "nope.yaml: no such rehearsal file") {
		t.Errorf("missing file: %v", err)
	}
}

func TestMechanismCheckOff(t *testing.T) {
	for _, y := range []string{"mechanism_check: ~", "mechanism_check: {disabled: true}"} {
		r, err := Parse([]byte("model: {id: m}\nservers: [{name: s, launch: [x, '{port}']}]\n"+y+"\n"), "r.yaml", "/")
		if err != nil {
			t.Fatal(err)
		}
		if r.MechanismCheck != nil {
			t.Errorf("%s: mechanism check still on: %+v", y, r.MechanismCheck)
		}
	}
}

// A server with no metrics endpoint (ollama) gets a mechanism check that
// reads no metric: evidence client, no metric named, defaulted or given.
func TestMechanismCheckEvidence(t *testing.T) {
	servers := "model: {id: m}\nservers: [{name: a, launch: [x, '{port}']}, {name: b, launch: [x, '{port}']}]\n"
	r, err := Parse([]byte(servers+"mechanism_check: {evidence: client}\n"), "r.yaml", "/")
	if err != nil {
		t.Fatal(err)
	}
	if m := r.MechanismCheck; m == nil || m.Evidence != EvidenceClient || m.Metric != "" || m.Server != "b" {
		t.Errorf("evidence client: %+v", m)
	}
	if r, err := Parse([]byte(servers), "r.yaml", "/"); err != nil || r.MechanismCheck.Evidence != EvidenceMetric {
		t.Errorf("the default: %+v, %v", r.MechanismCheck, err)
	}
	for y, want := range map[string]string{
		"mechanism_check: {evidence: client, metric: vllm:num_requests_running}": "mechanism_check.metric: \"vllm:num_requests_running\": no metric is read with evidence client",
		"mechanism_check: {evidence: logs}":                                      "mechanism_check.evidence: \"logs\": must be metric",
	} {
		_, err := Parse([]byte(servers+y+"\n"), "r.yaml", "/")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", y, err, want)
		}
	}
}

func TestRedaction(t *testing.T) {
	env := map[string]string{
		"HF_TOKEN": "hf_secret", "OPENAI_API_KEY": "sk-1", "DB_PASSWORD": "pw", "MY_AUTH_HEADER": "x",
		"SERVICE_CREDENTIALS": "c", "CUSTOM": "visible-but-api-key-env", "CUDA_VISIBLE_DEVICES": "0",
	}
	got := RedactEnv(env, "CUSTOM")
	want := map[string]string{
		"HF_TOKEN": secret.Redacted, "OPENAI_API_KEY": secret.Redacted, "DB_PASSWORD": secret.Redacted, "MY_AUTH_HEADER": secret.Redacted,
		"SERVICE_CREDENTIALS": secret.Redacted, "CUSTOM": secret.Redacted, "CUDA_VISIBLE_DEVICES": "0",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RedactEnv = %v, want %v", got, want)
	}
	if env["HF_TOKEN"] != "hf_secret" {
		t.Error("RedactEnv modified its input")
	}
	argv := RedactArgv([]string{"vllm", "serve", "m", "--api-key", "sk-1", "--hf-token=hf_x", "--port", "8000"})
	wantArgv := []string{"vllm", "serve", "m", "--api-key", secret.Redacted, "--hf-token=" + secret.Redacted, "--port", "8000"}
	if !slices.Equal(argv, wantArgv) {
		t.Errorf("RedactArgv = %q", argv)
	}
}

func TestDurationForms(t *testing.T) {
	r, err := Parse([]byte("model: {id: m}\nservers: [{name: s, launch: [x, '{port}'], ready: {timeout: 90}, stop_grace: 2.5}]\nworkload: {timeout: 1m30s}\n"), "r.yaml", "/")
	if err != nil {
		t.Fatal(err)
	}
	if r.Servers[0].Ready.Timeout.D() != 90*time.Second || r.Servers[0].StopGrace.D() != 2500*time.Millisecond || r.Workload.Timeout.D() != 90*time.Second {
		t.Errorf("durations: %v %v %v", r.Servers[0].Ready.Timeout, r.Servers[0].StopGrace, r.Workload.Timeout)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(seedYAML))
	f.Add([]byte("servers: [{name: s, launch: []}]"))
	f.Add([]byte("workload: {concurrencies: [1, 2.5], timeout: -3}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data, "f.yaml", "/")
		if err == nil && len(r.Servers) == 0 {
			t.Fatal("a rehearsal without servers validated")
		}
	})
}

func TestIsSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"HF_TOKEN": true, "OPENAI_API_KEY": true, "api-key": true, "apiKey": true, "hf-token": true,
		"DB_PASSWORD": true, "AUTHORIZATION": true, "MY_AUTH_HEADER": true, "client_secret": true, "APIKEY": true,
		"tokenizer-file": false, "TOKENIZERS_PARALLELISM": false, "port": false, "max-num-seqs": false, "dtype": false,
	} {
		if got := IsSecretName(name); got != want {
			t.Errorf("IsSecretName(%q) = %v, want %v", name, got, want)
		}
	}
	got := RedactArgv([]string{"serve", "--tokenizer-file", "/tmp/t.json", "--api-key", "sk-1", "--hf-token=hf_x"})
	want := []string{"serve", "--tokenizer-file", "/tmp/t.json", "--api-key", secret.Redacted, "--hf-token=" + secret.Redacted}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("RedactArgv = %q, want %q", got, want)
	}
}

// TestExtraBodyCannotOverrideRehearseFields: the body is extra_body merged
// over rehearse's own, so `stream: false` would silently turn streaming off.
func TestExtraBodyCannotOverrideRehearseFields(t *testing.T) {
	_, err := Parse([]byte("servers: [{name: s, base_url: 'http://127.0.0.1:1'}]\nmodel: {id: m}\n"+
		"workload: {extra_body: {stream: false, ignore_eos: true, max_tokens: 9}}\n"), "x.yaml", t.TempDir())
	if err == nil {
		t.Fatal("accepted extra_body.stream")
	}
	for _, want := range []string{`workload.extra_body.stream: "stream" is set by rehearse`, `workload.extra_body.max_tokens: "max_tokens" is set by rehearse`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "ignore_eos") {
		t.Errorf("ignore_eos is the server's to take: %v", err)
	}
	if errs := CheckExtraBody(map[string]any{"ignore_eos": true, "top_k": 1}); len(errs) != 0 {
		t.Errorf("CheckExtraBody = %v", errs)
	}
}

// TestReadyTimeoutOfARunningServer: a base_url server is up or it is not;
// a launched one may download and compile for minutes.
func TestReadyTimeoutOfARunningServer(t *testing.T) {
	r, err := Parse([]byte("model: {id: m}\nservers:\n  - {name: remote, base_url: 'http://127.0.0.1:1'}\n  - {name: local, launch: [x, '{port}']}\n  - {name: slow, base_url: 'http://127.0.0.1:2', ready: {timeout: 5m}}\n"), "x.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []time.Duration{30 * time.Second, 10 * time.Minute, 5 * time.Minute} {
		if got := r.Servers[i].Ready.Timeout.D(); got != want {
			t.Errorf("%s: ready.timeout %v, want %v", r.Servers[i].Name, got, want)
		}
	}
}

// TestOpenLoopArrivalAsTheScheduleHasIt: the arrival rule is the schedule's
// own (workload.NewSchedule), which bench applies to its flags too.
func TestOpenLoopArrivalAsTheScheduleHasIt(t *testing.T) {
	base := "servers: [{name: s, base_url: 'http://127.0.0.1:1'}]\nmodel: {id: m}\nworkload: {concurrencies: [], open_loop: {request_rates_rps: [2], num_requests: 4, "
	for _, c := range []struct{ ol, want string }{
		{"arrival: fixed, burstiness: 2", "workload.open_loop.burstiness: burstiness 2 applies to gamma arrivals only"},
		{"arrival: bursty", `workload.open_loop.arrival: "bursty": want one of fixed, poisson, gamma`},
		{"arrival: gamma, burstiness: 0.5", ""},
	} {
		_, err := Parse([]byte(base+c.ol+"}}\n"), "x.yaml", t.TempDir())
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.ol, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.ol, err, c.want)
		}
	}
	if errs := CheckConcurrencies([]int{8, 0, 8}); len(errs) != 2 || errs[0].Msg != "0: must be at least 1" || errs[1].Msg != "8 appears twice" {
		t.Errorf("CheckConcurrencies = %+v", errs)
	}
}

// TestSecretValues: the values the scrubber of server logs hides are those
// RedactEnv and RedactArgv hide, once each.
func TestSecretValues(t *testing.T) {
	env := map[string]string{"HF_TOKEN": "hf_x", "CUSTOM": "k1", "PATH": "/bin", "EMPTY_TOKEN": "", "OTHER_KEY": "hf_x"}
	argv := []string{"vllm", "serve", "--api-key", "sk-1", "--hf-token=hf_y", "--port", "8000", "--token", "--x"}
	got := SecretValues(env, "CUSTOM", argv)
	want := []string{"k1", "hf_x", "sk-1", "hf_y"}
	if !slices.Equal(got, want) {
		t.Errorf("SecretValues = %q, want %q", got, want)
	}
	for _, v := range got {
		for k, ev := range RedactEnv(env, "CUSTOM") {
			if env[k] == v && ev != secret.Redacted {
				t.Errorf("%s=%s is scrubbed but not redacted", k, v)
			}
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://user:s3cret@127.0.0.1:8000/v1":        "http://[redacted]@127.0.0.1:8000/v1",
		"https://tok@example.com":                     "https://[redacted]@example.com",
		"http://u:p@ss@host/x?mail=a@b":               "http://[redacted]@host/x?mail=a@b",
		"http://127.0.0.1:8000":                       "http://127.0.0.1:8000",
		`GET "http://a:b@h/m": refused; http://c:d@e`: `GET "http://[redacted]@h/m": refused; http://[redacted]@e`,
		"write to user@example.com, see http://h/p@q": "write to user@example.com, see http://h/p@q",
		"http://user:s3cret@":                         "http://[redacted]@",
		"http://[redacted]@h":                         "http://[redacted]@h",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// follow_redirects is a server's own choice, false unless set, and strictly
// a boolean.
func TestFollowRedirects(t *testing.T) {
	r, err := Parse([]byte("model: {id: m}\nservers:\n  - {name: a, base_url: 'http://127.0.0.1:1', follow_redirects: true}\n  - {name: b, base_url: 'http://127.0.0.1:2'}\n"), "x.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !r.Servers[0].FollowRedirects || r.Servers[1].FollowRedirects {
		t.Fatalf("follow_redirects: %v, %v", r.Servers[0].FollowRedirects, r.Servers[1].FollowRedirects)
	}
	_, err = Parse([]byte("model: {id: m}\nservers: [{name: a, base_url: 'http://127.0.0.1:1', follow_redirects: sometimes}]\n"), "x.yaml", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "servers[0].follow_redirects: want true or false") {
		t.Fatalf("got %v", err)
	}
}

func TestReadyModeAndWarmupConcurrency(t *testing.T) {
	r, err := Parse([]byte("model: {id: m}\nservers:\n  - {name: a, base_url: 'http://127.0.0.1:1'}\n  - {name: b, base_url: 'http://127.0.0.1:2', ready: {mode: models}}\nworkload: {warmup_waves: 1, warmup_concurrency: 4}\n"), "x.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if r.Servers[0].Ready.Mode != ReadyFull || r.Servers[1].Ready.Mode != ReadyModels || r.Workload.WarmupConcurrency != 4 {
		t.Errorf("ready modes %q %q, warmup_concurrency %d", r.Servers[0].Ready.Mode, r.Servers[1].Ready.Mode, r.Workload.WarmupConcurrency)
	}
	_, err = Parse([]byte("model: {id: m}\nservers: [{name: a, base_url: 'http://x', ready: {mode: sometimes}}]\nworkload: {warmup_concurrency: -1, warmup_waves_per_load: -2}\n"), "x.yaml", t.TempDir())
	for _, want := range []string{`servers[0].ready.mode: "sometimes": want full, models or answer`, "workload.warmup_concurrency: -1: must be 1 or more", "workload.warmup_waves_per_load: -2: must be 0 or more"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v, want %q", err, want)
		}
	}
}

func TestSustainedMode(t *testing.T) {
	base := "servers: [{name: s, base_url: 'http://127.0.0.1:1'}]\nmodel: {id: m}\nworkload: "
	r, err := Parse([]byte(base+"{concurrencies: [16], mode: sustained}\n"), "x.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Workload.Sustained; s == nil || s.NumRequests != DefaultSustainedNumRequests || s.WarmupRequests != DefaultSustainedWarmupRequests || s.Duration != 0 {
		t.Errorf("sustained defaults %+v", s)
	}
	if r, err := Parse([]byte(base+"{concurrencies: [16]}\n"), "x.yaml", t.TempDir()); err != nil || r.Workload.Mode != DefaultMode || r.Workload.Sustained != nil {
		t.Errorf("default mode: %v %+v", err, r)
	}
	r, err = Parse([]byte(base+"{mode: sustained, sustained: {duration: 30s, warmup_requests: 8}}\n"), "x.yaml", t.TempDir())
	if err != nil || *r.Workload.Sustained != (Sustained{Duration: Duration(30 * time.Second), WarmupRequests: 8}) {
		t.Errorf("duration only: %v %+v", err, r)
	}
	_, err = Parse([]byte(base+"{mode: sustained, sustained: {num_requests: -1, duration: -1s, warmup_requests: -2, seed: 3}}\n"), "x.yaml", t.TempDir())
	for _, want := range []string{
		"workload.sustained.seed: unknown key (known: num_requests, duration, warmup_requests)",
		"workload.sustained.num_requests: -1: must be 0 or more",
		"workload.sustained.duration: -1s: negative",
		"workload.sustained.warmup_requests: -2: must be 0 or more",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
	for yaml, want := range map[string]string{
		"{mode: steady}":                              `workload.mode: "steady": want closed or sustained`,
		"{sustained: {num_requests: 4}}":              "workload.sustained: given, but workload.mode is closed (set mode: sustained)",
		"{mode: sustained, sustained: {bad: 1}}":      "workload.sustained.bad: unknown key",
		"{mode: sustained, sustained: [1]}":           "workload.sustained: want a mapping",
		"{mode: sustained, sustained: {duration: x}}": `workload.sustained.duration: "x" is not a duration`,
	} {
		if _, err := Parse([]byte(base+yaml+"\n"), "x.yaml", t.TempDir()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", yaml, err, want)
		}
	}
}
