package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// modelServer is an OpenAI-compatible endpoint whose GET /v1/models
// answers models (status 200; "" answers 404, as a server without the
// route does), streams two words per request, and keeps the model each
// request asked for.
type modelServer struct {
	*httptest.Server
	mu    sync.Mutex
	asked []string
}

func newModelServer(t *testing.T, models string) *modelServer {
	t.Helper()
	s := &modelServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			if models == "" {
				http.NotFound(rw, r)
				return
			}
			io.WriteString(rw, models)
			return
		}
		var body struct {
			Model string `json:"model"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		s.mu.Lock()
		s.asked = append(s.asked, body.Model)
		s.mu.Unlock()
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, "data: {\"choices\":[{\"delta\":{\"content\":\"Hello there\"}}]}\n\n")
		fmt.Fprint(rw, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"completion_tokens\":2,\"prompt_tokens\":3}}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *modelServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}

// TestLoadCommandsRefuseAModelNotServed: bench and capacity against a
// server whose /v1/models lists other models stop before any request: one
// line naming the model and the served ones, exit 2, no bundle folder.
// --served-model-name is the name checked (the one the requests send).
func TestLoadCommandsRefuseAModelNotServed(t *testing.T) {
	srv := newModelServer(t, `{"object":"list","data":[{"id":"qwen-toy:latest"},{"id":"llama:8b"}]}`)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"bench --model", []string{"bench", "--model", "Qwen/Qwen2.5-1.5B-Instruct"},
			`rehearse: server: model "Qwen/Qwen2.5-1.5B-Instruct" is not served: `},
		{"bench --served-model-name", []string{"bench", "--model", "Qwen/Qwen2.5-1.5B-Instruct", "--served-model-name", "qwen-toy:7b"},
			`rehearse: server: model "qwen-toy:7b" is not served: `},
		{"capacity", []string{"capacity", "--model", "llama", "--slo", "ttft<=1s"},
			`rehearse: server: model "llama" is not served: `},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b")
			code, out, errs := runMain(context.Background(), append(c.args, "--base-url", srv.URL, "--tokenizer", "usage", "-o", dir)...)
			if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, c.want) ||
				!strings.HasSuffix(errs, `: the server's GET /v1/models lists "qwen-toy:latest", "llama:8b"`+"\n") {
				t.Errorf("exit %d, stdout %q, stderr %q: want exit 2 and one line beginning %q, naming the served models", code, out, errs, c.want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the bundle folder was made: %v", err)
			}
		})
	}
	if asked := srv.requests(); len(asked) != 0 {
		t.Errorf("%d requests sent: %q", len(asked), asked)
	}
}

// TestBenchTakesOllamasLatestTag: ollama lists NAME as NAME:latest; --model
// NAME is served, and the requests send the name the user gave.
func TestBenchTakesOllamasLatestTag(t *testing.T) {
	srv := newModelServer(t, `{"object":"list","data":[{"id":"qwen-toy:latest","object":"model","owned_by":"library"}]}`)
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--model", "qwen-toy", "--tokenizer", "usage",
		"--concurrency", "2", "--repeats", "1", "--max-tokens", "2", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	asked := srv.requests()
	if len(asked) != 2 || asked[0] != "qwen-toy" || asked[1] != "qwen-toy" {
		t.Errorf("requests asked for %q, want qwen-toy twice", asked)
	}
}

// TestBenchWithoutAModelListGoesOn: a server whose /v1/models is a 404
// cannot say what it serves; bench is not refused, and runs.
func TestBenchWithoutAModelListGoesOn(t *testing.T) {
	srv := newModelServer(t, "")
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--model", "anything", "--tokenizer", "usage",
		"--concurrency", "1", "--repeats", "1", "--max-tokens", "2", "-o", dir)
	if code != 0 || len(srv.requests()) != 1 {
		t.Fatalf("exit %d, %d requests\n%s\n%s", code, len(srv.requests()), out, errs)
	}
}

// TestRunRefusesALaunchedServerOfAnotherModel: rehearse run launches a
// simulator that serves another model than the file names; once it is
// ready it is refused before any request: exit 2, the line naming the
// model and the served one, and the bundle notes it.
func TestRunRefusesALaunchedServerOfAnotherModel(t *testing.T) {
	t.Setenv(rehearseMainEnv, "1") // {rehearse} sim is the real command
	dir := filepath.Join(t.TempDir(), "bundle")
	file := filepath.Join(t.TempDir(), "r.yaml")
	yaml := `model: {id: Qwen/Qwen2.5-1.5B-Instruct}
servers:
  - name: sim
    launch: ["{rehearse}", sim, --engine, batching, --model, other/model, --port, "{port}", --time-scale, "20", --quiet]
    ready: {timeout: 30s}
workload: {concurrencies: [1], repeats: 1, max_tokens: 4}
mechanism_check: ~
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run(t, "run", "-f", file, "-o", dir, "-q")
	want := `rehearse: sim: model "Qwen/Qwen2.5-1.5B-Instruct" is not served: the server's GET /v1/models lists "other/model"; no request was sent to it`
	if code != 2 || !strings.Contains(errs, want) {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 2 and %q", code, errs, want)
	}
	readme, _ := os.ReadFile(filepath.Join(dir, "README.md"))
	if !strings.Contains(string(readme), `server sim was not rehearsed: model "Qwen/Qwen2.5-1.5B-Instruct" is not served`) {
		t.Errorf("the report does not say why:\n%s", readme)
	}
}
