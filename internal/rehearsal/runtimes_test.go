package rehearsal

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestServerRuntimes(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/version", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"version": "0.29.0"}`))
	})
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"object":"list","data":[{"id":"m","rehearse":{"torch":"2.11.0+cu130","transformers":"5.17.0","random_weights":true,"engine":"naive"}}]}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	got := serverRuntimes(context.Background(), http.DefaultClient, "naive", srv.URL, "")
	want := map[string]string{"vllm": "0.29.0", "torch": "2.11.0+cu130", "transformers": "5.17.0"}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %v", got, want)
	}
	for _, r := range got {
		if want[r.Name] != r.Version || r.Server != "naive" {
			t.Errorf("runtime %+v, want %s %s", r, r.Name, want[r.Name])
		}
	}
	// A server that reports nothing (or is gone) gives nothing.
	srv.Close()
	if got := serverRuntimes(context.Background(), http.DefaultClient, "x", srv.URL, ""); len(got) != 0 {
		t.Errorf("closed server: %+v", got)
	}
}
