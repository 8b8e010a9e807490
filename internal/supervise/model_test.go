package supervise

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/stream"
)

// modelsServer answers GET /v1/models with status and body, /health with
// 200, and counts the POSTs it is sent.
func modelsServer(t *testing.T, status int, body string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	posts := &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch {
		case r.Method == http.MethodPost:
			posts.Add(1)
			io.WriteString(w, `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"x"}}]}`)
		case r.URL.Path == "/v1/models":
			w.WriteHeader(status)
			io.WriteString(w, body)
		default:
			io.WriteString(w, "ok")
		}
	}))
	t.Cleanup(srv.Close)
	return srv, posts
}

// TestReadinessRefusesAModelNotServed: in every readiness mode, a model
// list that does not serve the probe's model ends the wait at once, before
// the tiny request, with a *stream.ModelNotServedError that names the
// model and the served ones.
func TestReadinessRefusesAModelNotServed(t *testing.T) {
	srv, posts := modelsServer(t, 200, `{"object":"list","data":[{"id":"qwen-toy:latest"},{"id":"other"}]}`)
	for _, mode := range []string{ReadyFull, ReadyModels, ReadyAnswer} {
		err := WaitReady(context.Background(), nil, Probe{Name: "local", BaseURL: srv.URL, Model: "qwen", Mode: mode, Timeout: time.Hour, Interval: 10 * time.Millisecond})
		nse, ok := errors.AsType[*stream.ModelNotServedError](err)
		if !ok {
			t.Fatalf("%s: %v, want a ModelNotServedError", mode, err)
		}
		if want := `local: model "qwen" is not served: the server's GET /v1/models lists "qwen-toy:latest", "other"`; nse.Error() != want {
			t.Errorf("%s: %q, want %q", mode, nse, want)
		}
	}
	if n := posts.Load(); n != 0 {
		t.Errorf("%d requests sent to a server that does not serve the model", n)
	}
}

// TestReadinessTakesLatestAsTheModel: ollama lists NAME as NAME:latest;
// readiness takes either for the other, and the tiny request is sent.
func TestReadinessTakesLatestAsTheModel(t *testing.T) {
	srv, posts := modelsServer(t, 200, `{"object":"list","data":[{"id":"qwen-toy:latest"}]}`)
	for _, mode := range []string{ReadyFull, ReadyModels, ReadyAnswer} {
		if err := WaitReady(context.Background(), nil, Probe{BaseURL: srv.URL, Model: "qwen-toy", Mode: mode, Timeout: 5 * time.Second, Interval: 10 * time.Millisecond}); err != nil {
			t.Errorf("%s: %v", mode, err)
		}
	}
	if n := posts.Load(); n != 1 {
		t.Errorf("%d tiny requests, want 1 (mode full)", n)
	}
}

// TestReadinessWithoutAModelList: a server whose /v1/models answers no
// model list is not refused for the model: there is nothing to check it
// against. (A 404 there is still mode full's and models' "no /v1/models
// route"; mode answer takes any answer.)
func TestReadinessWithoutAModelList(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		modes  []string
	}{
		{200, "<html>a page</html>", []string{ReadyFull, ReadyModels, ReadyAnswer}},
		{200, `{"models":["qwen"]}`, []string{ReadyFull, ReadyModels, ReadyAnswer}},
		{404, `404 page not found`, []string{ReadyAnswer}},
	} {
		srv, _ := modelsServer(t, c.status, c.body)
		for _, mode := range c.modes {
			if err := WaitReady(context.Background(), nil, Probe{BaseURL: srv.URL, Model: "qwen", Mode: mode, Timeout: 5 * time.Second, Interval: 10 * time.Millisecond}); err != nil {
				t.Errorf("HTTP %d %q, mode %s: %v", c.status, c.body, mode, err)
			}
		}
	}
}

// TestCheckModelAsksOnce: CheckModel refuses a model the list does not
// serve, and says nothing of a server that lists it, answers no list, or
// does not answer at all (readiness will wait for it).
func TestCheckModelAsksOnce(t *testing.T) {
	listing, _ := modelsServer(t, 200, `{"data":[{"id":"m"}]}`)
	page, _ := modelsServer(t, 404, `not found`)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	err := CheckModel(context.Background(), Probe{Name: "s", BaseURL: listing.URL, Model: "n"})
	if _, ok := errors.AsType[*stream.ModelNotServedError](err); !ok || !strings.Contains(err.Error(), `s: model "n" is not served: the server's GET /v1/models lists "m"`) {
		t.Errorf("not served: %v", err)
	}
	for _, c := range []struct{ url, model string }{{listing.URL, "m"}, {listing.URL, ""}, {page.URL, "n"}, {down.URL, "n"}} {
		if err := CheckModel(context.Background(), Probe{BaseURL: c.url, Model: c.model}); err != nil {
			t.Errorf("%s, model %q: %v", c.url, c.model, err)
		}
	}
}
