package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

const benchNofileEnv = "REHEARSE_CLI_NOFILE_URL"

// A plan wider than the open-file limit is refused before any request,
// with one line and exit 2, instead of failing its requests for want of
// descriptors. The test binary re-executes itself with a soft limit of 256
// and runs bench at 300 clients against a server that counts requests.
func TestBenchRefusesAPlanBeyondTheOpenFileLimit(t *testing.T) {
	if base := os.Getenv(benchNofileEnv); base != "" {
		lim := syscall.Rlimit{Cur: 256}
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &cur); err != nil {
			t.Fatal(err)
		}
		lim.Max = cur.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runMain(context.Background(), "bench", "--base-url", base, "--model", "m", "--tokenizer", "usage",
			"--concurrency", "300", "--repeats", "1", "--max-tokens", "2", "--progress", "never", "-o", filepath.Join(t.TempDir(), "b"))
		fmt.Printf("exit %d\nstderr %q\n", code, stderr)
		return
	}
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, "data: {\"choices\":[{\"delta\":{\"content\":\"w \"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchRefusesAPlanBeyondTheOpenFileLimit$")
	cmd.Env = append(os.Environ(), benchNofileEnv+"="+srv.URL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	want := `stderr "rehearse: bench: the plan keeps up to 300 connections open (concurrency 300) and needs 364 open files with the 64 reserved, but the open-file limit is 256; raise it with ulimit -n\n"`
	if !strings.Contains(string(out), "exit 2\n") || !strings.Contains(string(out), want) {
		t.Errorf("child output:\n%s\nwant exit 2 and %s", out, want)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the server saw %d requests of a refused plan", n)
	}
}

// run refuses such a plan in one line with exit 2, before launching a
// server (rehearsal.Run checks; the launch here would fail loudly).
func TestRunRefusesAPlanBeyondTheOpenFileLimit(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "r.yaml")
	cfg := "model: {id: m}\ntokenizer: {variant: qwen3}\nservers:\n  - {name: s, launch: [/nonexistent/server, '{port}']}\nworkload: {concurrencies: [1073741824], repeats: 1}\n"
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, "run", "-f", file, "-o", filepath.Join(dir, "out"))
	if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "rehearse: run: the plan keeps up to 1073741824 connections open (concurrency 1073741824)") {
		t.Fatalf("exit %d, stderr %q: want exit 2 and the refusal alone", code, stderr)
	}
}
