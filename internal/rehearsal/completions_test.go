package rehearsal_test

import (
	"context"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

// A rehearsal file whose workload.endpoint is /v1/completions rehearses the
// completions API end to end: readiness sends it its tiny request, every
// request is a completions body, and the text of choices[0].text is what
// the records keep and count.
func TestCompletionsEndpointRehearsal(t *testing.T) {
	r := newRun(t, model+"servers:\n"+simServer("batching", "batching")+
		"workload: {endpoint: /v1/completions, concurrencies: [2], repeats: 1, max_tokens: 8, timeout: 20s}\n")
	out := r.do(t, context.Background())
	if out.Interrupted || len(out.Failed) > 0 {
		t.Fatalf("outcome: %+v", out)
	}
	n := 0
	for _, rec := range out.Results.Records {
		if rec.Kind != contract.KindRecorded {
			continue
		}
		n++
		if !rec.OK || rec.Text == "" || rec.FirstContentS == nil {
			t.Errorf("record %+v: want ok, with text and a first content time", rec)
		}
	}
	if n != 2 || out.Results.Workload.Endpoint != "/v1/completions" {
		t.Fatalf("%d recorded, endpoint %q", n, out.Results.Workload.Endpoint)
	}
}
