package supervise

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

func startServe(t *testing.T, mode string) (*Process, string) {
	t.Helper()
	port := freePort(t)
	s := spec(t, mode, port)
	s.Secrets = []string{"hunter2-secret-value"}
	p, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop() })
	return p, "http://127.0.0.1:" + strconv.Itoa(port)
}

// TestPrepareRunsOnceTheServerAnswers: the prepare commands run after the
// health path answers, with the server's environment, their output in its
// log (scrubbed) between marker lines, before the model check and the tiny
// request; a model listed as NAME:latest is the model NAME.
func TestPrepareRunsOnceTheServerAnswers(t *testing.T) {
	p, base := startServe(t, "serve")
	cmds := []Command{
		// The caller shows an argv with its secrets redacted, as the launch.
		{Argv: []string{"sh", "-c", "echo preparing TEST_ENV=$TEST_ENV hunter2-secret-value"},
			Shown: []string{"sh", "-c", "echo preparing TEST_ENV=$TEST_ENV [redacted]"}},
		{Argv: []string{"sh", "-c", "echo second >&2"}, Shown: []string{"second-shown"}},
	}
	err := WaitReady(context.Background(), p, Probe{BaseURL: base, Model: "m1:latest", Prepare: cmds,
		Timeout: 10 * time.Second, Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p.Stop()
	log := readLog(t, p.LogPath())
	order := []string{
		"listening; TEST_ENV=override",
		`==> rehearse: prepare: running sh -c "echo preparing`,
		"preparing TEST_ENV=override [redacted]",
		`==> rehearse: prepare sh -c "echo preparing`,
		"exited with status 0 after ",
		"==> rehearse: prepare: running second-shown",
		"second\n",
		"==> rehearse: prepare second-shown exited with status 0",
		"INFO request", // the tiny request came after
	}
	at := 0
	for _, want := range order {
		i := strings.Index(log[at:], want)
		if i < 0 {
			t.Fatalf("log lacks %q after byte %d:\n%s", want, at, log)
		}
		at += i + len(want)
	}
	if strings.Contains(log, "hunter2") {
		t.Errorf("a secret reached the log:\n%s", log)
	}
}

// TestPrepareFailureEndsReadiness: a prepare command that fails is the
// server's failure to become ready, named with its output; nothing after
// it runs.
func TestPrepareFailureEndsReadiness(t *testing.T) {
	p, base := startServe(t, "serve")
	err := WaitReady(context.Background(), p, Probe{BaseURL: base, Model: "m1", Timeout: 10 * time.Second, Interval: 20 * time.Millisecond,
		Prepare: []Command{{Argv: []string{"sh", "-c", "echo cannot create the model >&2; exit 7"}}, {Argv: []string{"true"}}}})
	if err == nil {
		t.Fatal("readiness passed after a failed prepare")
	}
	for _, want := range []string{"not ready: prepare sh -c", "failed after", "exit status 7", "cannot create the model"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	p.Stop()
	log := readLog(t, p.LogPath())
	if strings.Contains(log, "prepare: running true") || strings.Contains(log, "INFO request") {
		t.Errorf("steps after the failed prepare ran:\n%s", log)
	}
}

// TestPrepareWaitsForTheHealthPath: no prepare before the server answers.
func TestPrepareWaitsForTheHealthPath(t *testing.T) {
	p, base := startServe(t, "unhealthy")
	err := WaitReady(context.Background(), p, Probe{BaseURL: base, Timeout: time.Second, Interval: 20 * time.Millisecond,
		Prepare: []Command{{Argv: []string{"true"}}}})
	// The last attempt may end with its 503 or still be waiting at the
	// deadline on a loaded machine: either way the error names the 503.
	if err == nil || !strings.Contains(err.Error(), "/health") || !strings.Contains(err.Error(), "503") {
		t.Fatalf("got %v; want a readiness stuck at GET /health", err)
	}
	if log := readLog(t, p.LogPath()); strings.Contains(log, "prepare") {
		t.Errorf("prepare ran before the health path answered:\n%s", log)
	}
	if err := WaitReady(context.Background(), nil, Probe{BaseURL: base, Prepare: []Command{{Argv: []string{"true"}}}}); err == nil {
		t.Error("prepare accepted without a launched process")
	}
}
