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
