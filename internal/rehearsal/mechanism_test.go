package rehearsal_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/sim"
	"github.com/rehearse/rehearse/internal/sim/engine"
)

// noMetrics serves a simulated engine as an engine with no metrics
// endpoint does (ollama): /metrics is not found.
func noMetrics(t *testing.T, eng string) string {
	t.Helper()
	s, err := sim.New(sim.Options{Engine: eng, TimeScale: 20, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	mux := http.NewServeMux()
	mux.Handle("/", s.Handler())
	mux.Handle("/metrics", http.NotFoundHandler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs.URL
}

// Where a server has no metrics endpoint, the mechanism check reads none
// and says so: it rests on the client's records of its wave, which tell a
// serial engine (one request streaming at a time) from a batching one
// (several), and verify recomputes them. Asked for the metric of a server
// that serves none, it reads no sample and falls back to the same
// evidence, never claiming a maximum it did not read.
func TestMechanismCheckWithoutMetrics(t *testing.T) {
	serial, batching := noMetrics(t, engine.Serial), noMetrics(t, engine.Batching)
	servers := "servers:\n  - name: serial\n    base_url: " + serial + "\n  - name: batching\n    base_url: " + batching + "\n"
	for _, tc := range []struct {
		name, check string
		server      string
		streaming   func(int) bool
		metric      string
	}{
		{"client, batching", "{server: batching, evidence: client, concurrency: 4}", "batching", func(n int) bool { return n >= 2 }, ""},
		{"client, serial", "{server: serial, evidence: client, concurrency: 4}", "serial", func(n int) bool { return n == 1 }, ""},
		{"metric unread", "{server: batching, concurrency: 4, period: 5ms}", "batching", func(n int) bool { return n >= 2 }, "vllm:num_requests_running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun(t, model+"baseline: serial\n"+servers+
				"workload: {concurrencies: [1, 4], repeats: 1, max_tokens: 16, timeout: 20s}\nmechanism_check: "+tc.check+"\n")
			out := r.do(t, context.Background())
			if out.Interrupted || len(out.Failed) > 0 {
				t.Fatalf("outcome: %+v", out)
			}
			res := out.Results
			m := res.MechanismCheck
			if m == nil || m.Server != tc.server || !m.RestsOnClient() || m.Client == nil || m.Max != nil || len(m.Series) != 0 || m.Metric != tc.metric {
				t.Fatalf("mechanism check: %+v", m)
			}
			if c := m.Client; c.InFlightMax != 4 || !tc.streaming(c.StreamingMax) || len(c.ByStreaming) == 0 {
				t.Errorf("client's view: %+v", c)
			}
			notes := strings.Join(res.Notes, "\n")
			if unread := strings.Contains(notes, "no sample of vllm:num_requests_running was read"); unread != (tc.metric != "") {
				t.Errorf("notes:\n%s", notes)
			}
			if probs := bundle.VerifyResults(res); len(probs) > 0 {
				t.Errorf("verify: %v", probs)
			}
			if probs := bundletest.Verify(r.dir); len(probs) > 0 { // the records streamed past
				t.Errorf("verify %s: %v", r.dir, probs)
			}
			path := filepath.Join(r.dir, bundle.ResultsFile)
			text := readFile(t, path)
			tampered := regexp.MustCompile(`("streaming_max": *)(\d+)`).ReplaceAllString(text, "${1}1${2}") // 4 → 14, 1 → 11
			if err := os.WriteFile(path, []byte(tampered), 0o644); err != nil {
				t.Fatal(err)
			}
			if !hasField(bundletest.Verify(r.dir), "mechanism_check.client.streaming_max") {
				t.Errorf("verify streaming the records found no tampered streaming_max: %v", bundletest.Verify(r.dir))
			}
			readme := readFile(t, r.dir+"/"+bundle.ReadmeFile)
			// The baseline's closed waves at the check's clients, read the
			// same way: serial, one at a time.
			baseline := "the baseline `serial`'s recorded closed-loop wave at 4 clients had at most **1** streaming at once"
			if !strings.Contains(readme, "No server metric was read") || !strings.Contains(readme, "rests on the client's own records") ||
				strings.Contains(readme, "observed maximum") || strings.Contains(readme, baseline) != (tc.server != "serial") {
				t.Errorf("README's mechanism check:\n%s", section(readme, "## Mechanism check"))
			}

			if svg := readFileIfAny(filepath.Join(r.dir, "mechanism.svg")); !strings.Contains(svg, "requests streaming on "+tc.server+" (client records)") {
				t.Errorf("mechanism.svg does not draw the client's records (%d bytes)", len(svg))
			}

			// A stored view the records do not give is found.
			m.Client.StreamingMax++
			probs := bundle.VerifyResults(res)
			if len(probs) != 1 || probs[0].Field != "mechanism_check.client.streaming_max" {
				t.Errorf("a tampered streaming_max: %v", probs)
			}
			m.Client.StreamingMax--
			m.Evidence = bundle.EvidenceMetric
			if probs := bundle.VerifyResults(res); len(probs) != 1 || probs[0].Field != "mechanism_check.evidence" {
				t.Errorf("evidence metric with no sample read: %v", probs)
			}
		})
	}
}

func hasField(probs []bundle.Problem, field string) bool {
	for _, p := range probs {
		if p.Field == field {
			return true
		}
	}
	return false
}

// section is the markdown from heading to the next heading of its level.
func section(md, heading string) string {
	i := strings.Index(md, heading)
	if i < 0 {
		return ""
	}
	rest := md[i+len(heading):]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return heading + rest
}
