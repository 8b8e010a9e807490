package rehearsal

import (
	"errors"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/exitcode"
)

// Only recorded requests count: a warm-up that succeeded does not make a
// rehearsal whose every recorded request failed a success.
func TestOutcomeRequests(t *testing.T) {
	o := &Outcome{Results: &bundle.Results{Records: []contract.Record{
		{Kind: contract.KindWarmup, OK: true},
		{Kind: contract.KindRecorded, ErrorKind: contract.ErrHTTPStatus},
		{Kind: contract.KindRecorded, ErrorKind: contract.ErrConnect},
		{Kind: contract.KindMechanismCheck, OK: true},
	}}}
	ok, total, byKind := o.Requests()
	if ok != 0 || total != 2 || byKind[contract.ErrHTTPStatus] != 1 || byKind[contract.ErrConnect] != 1 {
		t.Fatalf("ok %d total %d by kind %v", ok, total, byKind)
	}
	if ok, total, _ := (&Outcome{}).Requests(); ok != 0 || total != 0 {
		t.Fatalf("no results: %d/%d", ok, total)
	}
}

// TestRehearsedErr: the exit status of a finished rehearsal, in the order
// the runner's tail decides it (an interruption first, then a refused
// input, a bundle that does not verify, failed servers, and a rehearsal
// none of whose recorded requests succeeded).
func TestRehearsedErr(t *testing.T) {
	failedAll := &bundle.Results{Records: []contract.Record{{Kind: contract.KindRecorded, ErrorKind: contract.ErrConnect}}}
	for _, c := range []struct {
		name string
		r    Rehearsed
		code int
		want string
	}{
		{"ok", Rehearsed{Outcome: &Outcome{Results: &bundle.Results{}}}, 0, ""},
		{"interrupted", Rehearsed{Outcome: &Outcome{Interrupted: true, Failed: []string{"x"}}}, exitcode.Interrupted, "interrupted; the bundle in D holds what finished (the first wave was not released)"},
		{"refused", Rehearsed{Outcome: &Outcome{Refused: errors.New("m is not served")}}, exitcode.Usage, "m is not served; no request was sent to it"},
		{"problems", Rehearsed{Outcome: &Outcome{Failed: []string{"x"}}, Problems: []bundle.Problem{{}, {}}}, 1, "D: the bundle does not verify (2 problems)"},
		{"failed", Rehearsed{Outcome: &Outcome{Failed: []string{"a died:\nlog tail", "b not ready"}}}, 1, "2 server(s) failed:\n  a died (shown above)\n  b not ready"},
		{"none succeeded", Rehearsed{Outcome: &Outcome{Results: failedAll}}, 1, "no request succeeded: all 1 recorded requests failed (connect 1)"},
	} {
		err := c.r.Err("D")
		var ee *exitcode.Error
		switch {
		case c.code == 0 && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.code == 0:
		case !errors.As(err, &ee) || ee.Code != c.code || !strings.HasPrefix(err.Error(), c.want):
			t.Errorf("%s: got %v (%T), want exit %d with %q", c.name, err, err, c.code, c.want)
		}
	}
}
