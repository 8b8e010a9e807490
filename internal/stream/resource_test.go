package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
)

// nofileChildEnv carries the parent's server URL to the re-executed test
// binary that runs out of file descriptors.
const nofileChildEnv = "REHEARSE_STREAM_NOFILE_CHILD"

// The load generator running out of file descriptors is its own failure,
// never the server's: the test binary is re-executed with an open-file
// limit 24 above what it holds and sends 64 requests at once to a server
// that holds every stream open, so about 40 of them cannot get a socket.
// None may be recorded as connect.
func TestOutOfFileDescriptorsIsTheClientsFailure(t *testing.T) {
	if base := os.Getenv(nofileChildEnv); base != "" {
		nofileChild(t, base)
		return
	}
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, roleChunk)
		http.NewResponseController(rw).Flush()
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer srv.Close()
	defer close(stop)
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutOfFileDescriptorsIsTheClientsFailure$", "-test.v")
	cmd.Env = append(os.Environ(), nofileChildEnv+"="+srv.URL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "kinds:") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

func nofileChild(t *testing.T, base string) {
	const requests, spare = 64, 24
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open descriptors: %v", err)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = uint64(len(fds) + spare)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	c := NewClient(nil)
	defer c.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	// A request either gets its connection (and the server holds its
	// stream until the cancel below) or fails to dial: once every request
	// has done one or the other, the failures are all in.
	var connected atomic.Int64
	traced := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Add(1) }})
	results := make(chan Result, requests)
	for range requests {
		go func() {
			results <- c.Do(traced, Request{BaseURL: base, Model: "m", Prompt: "p", MaxTokens: 1, Timeout: time.Minute})
		}()
	}
	kinds := map[string]int{}
	var sample string
	ended := 0
	take := func(r Result) {
		ended++
		kinds[r.ErrorKind]++
		if r.ErrorKind == contract.ErrClient && sample == "" {
			sample = r.Error
		}
		if r.ErrorKind != contract.ErrClient && r.ErrorKind != contract.ErrCanceled {
			t.Errorf("%s: %s", r.ErrorKind, r.Error)
		}
	}
	for ended+int(connected.Load()) < requests {
		select {
		case r := <-results:
			take(r)
		case <-time.After(10 * time.Millisecond):
		}
	}
	failedToDial := ended
	cancel(errors.New("test done"))
	for ended < requests {
		take(<-results)
	}
	t.Logf("kinds: %v (%d streams held at once); first client error: %s", kinds, requests-failedToDial, sample)
	if failedToDial < requests-spare-8 || kinds[contract.ErrClient] != failedToDial || !strings.Contains(sample, "too many open files") {
		t.Fatalf("want the %d requests that found no descriptor (at least %d) all client failures naming the open-file limit, got %v (%q)", failedToDial, requests-spare-8, kinds, sample)
	}
}

// Running out of descriptors, ports or buffers at dial is the client's
// failure; a refused connection is the server's.
func TestClientResourceErrorsAreTheClients(t *testing.T) {
	dialErr := func(call string, errno syscall.Errno) error {
		return &url.Error{Op: "Post", URL: "http://x/v1/chat/completions", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError(call, errno)}}
	}
	for _, tc := range []struct {
		err  error
		kind string
		has  string
	}{
		{dialErr("socket", syscall.EMFILE), contract.ErrClient, "ulimit -n"},
		{dialErr("socket", syscall.ENFILE), contract.ErrClient, "file descriptors"},
		{dialErr("connect", syscall.EADDRNOTAVAIL), contract.ErrClient, "ephemeral ports"},
		{dialErr("connect", syscall.ENOBUFS), contract.ErrClient, "buffer"},
		{fmt.Errorf("wrapped: %w", dialErr("socket", syscall.EMFILE)), contract.ErrClient, "too many open files"},
		{dialErr("connect", syscall.ECONNREFUSED), contract.ErrConnect, "refused"},
	} {
		var res Result
		c := NewClient(nil)
		c.classifyTransport(context.Background(), context.Background(), &res, tc.err, false)
		if res.ErrorKind != tc.kind || !strings.Contains(res.Error, tc.has) {
			t.Errorf("%v: %q %q, want %s naming %q", tc.err, res.ErrorKind, res.Error, tc.kind, tc.has)
		}
	}
	res := do(t, Request{BaseURL: "localhost:8000"})
	if res.ErrorKind != contract.ErrClient || !strings.Contains(res.Error, "cannot build request") {
		t.Errorf("unbuildable request: %q %q, want client", res.ErrorKind, res.Error)
	}
}
