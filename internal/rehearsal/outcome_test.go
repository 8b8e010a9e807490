package rehearsal

import (
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
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
