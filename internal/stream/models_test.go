package stream

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestFirstModelMaxModelLen: vLLM's max_model_len is read from the first
// model of /v1/models; a server that reports none (or nonsense) gives 0.
func TestFirstModelMaxModelLen(t *testing.T) {
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, body.Load().(string)) }))
	defer srv.Close()
	c := NewClient(nil)
	defer c.Close()
	for _, tc := range []struct {
		body string
		want Model
	}{
		{`{"data":[{"id":"a","max_model_len":4096},{"id":"b","max_model_len":8}]}`, Model{ID: "a", MaxModelLen: 4096}},
		{`{"data":[{"id":"a"}]}`, Model{ID: "a"}},
		{`{"data":[{"id":"a","max_model_len":-5}]}`, Model{ID: "a"}},
	} {
		body.Store(tc.body)
		m, err := c.FirstModel(context.Background(), srv.URL, "")
		if err != nil || m != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.body, m, err, tc.want)
		}
	}
}

// TestParseModels: an OpenAI model list gives its ids in order; anything
// else (a page, JSON of another shape) is no list.
func TestParseModels(t *testing.T) {
	models, err := ParseModels([]byte(`{"object":"list","data":[{"id":"a"},{"id":"b:latest"}]}`))
	if err != nil || len(models) != 2 || models[0].ID != "a" || models[1].ID != "b:latest" {
		t.Errorf("%+v %v", models, err)
	}
	if models, err := ParseModels([]byte(`{"object":"list","data":[]}`)); err != nil || len(models) != 0 {
		t.Errorf("an empty list: %+v %v", models, err)
	}
	for _, body := range []string{`<html>404 page not found</html>`, `{"detail":"Not Found"}`, `[]`, ``} {
		if _, err := ParseModels([]byte(body)); err == nil {
			t.Errorf("%q read as a model list", body)
		}
	}
}

// TestServesTakesLatestAsTheSameModel: ollama lists NAME as NAME:latest;
// either name is the same model, and no other tag is.
func TestServesTakesLatestAsTheSameModel(t *testing.T) {
	listed := []Model{{ID: "qwen-toy:latest"}, {ID: "Qwen/Qwen2.5-1.5B-Instruct"}, {ID: "llama:8b"}}
	for _, c := range []struct {
		name string
		want bool
	}{
		{"qwen-toy", true}, {"qwen-toy:latest", true}, {"Qwen/Qwen2.5-1.5B-Instruct", true},
		{"Qwen/Qwen2.5-1.5B-Instruct:latest", true}, {"llama:8b", true},
		{"llama", false}, {"llama:latest", false}, {"qwen-toy:7b", false}, {"Qwen/Qwen2.5-1.5B", false}, {"", false},
	} {
		if got := Serves(listed, c.name); got != c.want {
			t.Errorf("Serves(%q) = %v, want %v", c.name, got, c.want)
		}
	}
	err := CheckServed("local", listed, "qwen")
	want := `local: model "qwen" is not served: the server's GET /v1/models lists "qwen-toy:latest", "Qwen/Qwen2.5-1.5B-Instruct", "llama:8b"`
	if _, ok := err.(*ModelNotServedError); !ok || err.Error() != want {
		t.Errorf("CheckServed: %v, want %q", err, want)
	}
	if err := CheckServed("", nil, "m"); err == nil || err.Error() != `model "m" is not served: the server's GET /v1/models lists no model` {
		t.Errorf("an empty list: %v", err)
	}
}
