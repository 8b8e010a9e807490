package rehearsal_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/rehearsal"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/workload"
)

// TestLaunchedServerThatServesAnotherModel: a launched simulator that
// serves a model the rehearsal does not name is refused once it is ready,
// before any request: the runner stops there (the next server is not
// rehearsed), the Outcome says why, the bundle notes it and verifies, and
// the server is stopped.
func TestLaunchedServerThatServesAnotherModel(t *testing.T) {
	r := newRun(t, model+`servers:
  - name: wrong
    launch: ["{rehearse}", sim, --engine, batching, --port, "{port}", --time-scale, "20", --model, other/model]
    ready: {timeout: 20s}
    stop_grace: 3s
`+simServer("next", "batching")+"workload: {concurrencies: [1], repeats: 1, max_tokens: 8}\nmechanism_check: ~\n")
	out := r.do(t, context.Background())
	nse, ok := errors.AsType[*stream.ModelNotServedError](out.Refused)
	if !ok || nse.Model != "Qwen/Qwen2.5-1.5B-Instruct" || !slices.Equal(nse.Served, []string{"other/model"}) {
		t.Fatalf("refused %v, want the model not served", out.Refused)
	}
	if len(out.Results.Records) != 0 || len(out.Failed) != 0 {
		t.Errorf("%d records, failed %q: want none of either", len(out.Results.Records), out.Failed)
	}
	notes := strings.Join(out.Results.Notes, "\n")
	for _, want := range []string{
		`server wrong was not rehearsed: model "Qwen/Qwen2.5-1.5B-Instruct" is not served: the server's GET /v1/models lists "other/model"`,
		"server next was not rehearsed: the rehearsal stopped at server wrong's model",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if !strings.HasPrefix(out.Results.Servers[0].Exit, "stopped by rehearse") {
		t.Errorf("server wrong: exit %q", out.Results.Servers[0].Exit)
	}
	assertGone(t, r.pid(t, "wrong"))
	for _, ev := range r.events {
		if ev.Server == "next" {
			t.Errorf("server next was launched: %+v", ev)
		}
	}
}

// TestRunRefusesAnEndpointOfAnotherModel: an endpoint already running
// whose model list does not serve the rehearsal's model is refused by Run
// before it makes the bundle's folder, and the endpoint is asked nothing
// but its list.
func TestRunRefusesAnEndpointOfAnotherModel(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			asked.Add(1)
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, `{"data":[{"id":"llama"},{"id":"mistral"}]}`)
	}))
	defer srv.Close()
	cfg, err := config.Parse([]byte("model: {id: qwen-toy}\nservers:\n  - name: local\n    base_url: "+srv.URL+"\nworkload: {concurrencies: [1], repeats: 1}\nmechanism_check: ~\n"), "t.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bundle")
	out, err := rehearsal.Run(context.Background(), rehearsal.Options{Rehearsal: cfg, Dir: dir, Prompts: workload.Texts("Say hello.")})
	want := `local: model "qwen-toy" is not served: the server's GET /v1/models lists "llama", "mistral"`
	if _, ok := errors.AsType[*stream.ModelNotServedError](err); !ok || err.Error() != want || out != nil {
		t.Errorf("Run: %v, %+v; want %q", err, out, want)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the bundle folder was made: %v", err)
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("%d requests besides GET /v1/models", n)
	}
}
