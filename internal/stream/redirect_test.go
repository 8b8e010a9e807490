package stream

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

// redirecting answers every request with status and a Location to target
// (a path on itself when target is ""), and counts the requests.
func redirecting(t *testing.T, status int, target string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.Copy(io.Discard, r.Body)
		loc := target
		if loc == "" {
			loc = r.URL.Path
		}
		http.Redirect(rw, r, loc, status)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// counting serves a complete stream and counts the requests.
func counting(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, content("elsewhere")+finishChunk("stop")+done)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// A redirect to another host is the outcome of the request, not a stream
// to credit to the server under test: it is not followed.
func TestRedirectIsTheOutcome(t *testing.T) {
	other, otherN := counting(t)
	srv, _ := redirecting(t, http.StatusTemporaryRedirect, other.URL+"/v1/chat/completions")
	res := do(t, request(srv))
	if res.OK || res.ErrorKind != contract.ErrHTTPStatus || res.HTTPStatus != 307 {
		t.Fatalf("ok=%v %q %d %q: want http_status 307", res.OK, res.ErrorKind, res.HTTPStatus, res.Error)
	}
	if !strings.Contains(res.Error, other.URL+"/v1/chat/completions") || !strings.Contains(res.Error, "not followed") {
		t.Fatalf("error %q: want the Location named and said not followed", res.Error)
	}
	if n := otherN.Load(); n != 0 {
		t.Fatalf("the other host got %d requests", n)
	}
}

// Asked to, the client follows a redirect, and stops a loop as the
// outcome http_status.
func TestFollowRedirectsWhenAsked(t *testing.T) {
	other, otherN := counting(t)
	srv, _ := redirecting(t, http.StatusTemporaryRedirect, other.URL+"/v1/chat/completions")
	req := request(srv)
	req.FollowRedirects = true
	if res := do(t, req); !res.OK || res.Text != "elsewhere" || otherN.Load() != 1 {
		t.Fatalf("ok=%v %q %q text %q, %d requests elsewhere", res.OK, res.ErrorKind, res.Error, res.Text, otherN.Load())
	}
	loop, loopN := redirecting(t, http.StatusMovedPermanently, "")
	req = request(loop)
	req.FollowRedirects = true
	res := do(t, req)
	if res.ErrorKind != contract.ErrHTTPStatus || res.HTTPStatus != 301 || !strings.Contains(res.Error, "stopped after 10 redirects") {
		t.Fatalf("%q %d %q: want http_status 301 naming the loop", res.ErrorKind, res.HTTPStatus, res.Error)
	}
	if n := loopN.Load(); n != 10 {
		t.Fatalf("the loop was asked %d times, want 10 (the request and 9 redirects followed)", n)
	}
}
