package promscrape

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestLabeledKeepsEachLabelSet(t *testing.T) {
	sum, sets, err := Labeled(strings.NewReader(`# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m",engine="1"} 3
vllm:num_requests_running{engine="0",model_name="m"} 5
`), "vllm:num_requests_running")
	if err != nil {
		t.Fatal(err)
	}
	if sum != 8 || len(sets) != 2 || sets[0].Labels != `engine="0",model_name="m"` || sets[0].Value != 5 || sets[1].Value != 3 {
		t.Errorf("sum %v, sets %+v", sum, sets)
	}
}

// enginePage serves a vLLM-like page of two engines, each at value.
func enginePage(t *testing.T, a, b float64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "# TYPE m gauge\nm{engine=\"0\"} %v\nm{engine=\"1\"} %v\n", a, b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestGroupPollerKeepsReplicasAndLabelSets(t *testing.T) {
	r0, r1 := enginePage(t, 1, 2), enginePage(t, 10, 20)
	p, err := StartGroupPoller(context.Background(), []Scraper{{URL: r0.URL, Metric: "m"}, {URL: r1.URL, Metric: "m"}}, 2*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	waitTicks(p, 2)
	s := p.Stop()
	if s.Errors > 0 || len(s.Parts) != 2 || s.LabelSets != nil {
		t.Fatalf("series: %+v", s)
	}
	for _, smp := range s.Samples {
		if smp.Value != 33 {
			t.Errorf("sum sample %v, want 33", smp.Value)
		}
	}
	if m := s.Parts[1].Max(); m == nil || *m != 30 {
		t.Errorf("replica 1 max %v", m)
	}
	ls := s.Parts[0].LabelSets
	if len(ls) != 2 || ls[0].Labels != `engine="0"` || ls[1].Samples[0].Value != 2 {
		t.Errorf("replica 0 label sets: %+v", ls)
	}
}

func TestGroupPollerCountsAReplicaThatDoesNotAnswer(t *testing.T) {
	r0 := enginePage(t, 1, 2)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	p, err := StartGroupPoller(context.Background(), []Scraper{{URL: r0.URL, Metric: "m"}, {URL: down.URL, Metric: "m"}}, 2*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	waitTicks(p, 2)
	s := p.Stop()
	if len(s.Samples) != 0 || s.Errors == 0 || !strings.HasPrefix(s.FirstError, "replica 1: ") || len(s.Parts[0].Samples) == 0 || s.Parts[1].Errors == 0 {
		t.Errorf("series: samples %d, errors %d (%q), parts %d/%d samples", len(s.Samples), s.Errors, s.FirstError, len(s.Parts[0].Samples), len(s.Parts[1].Samples))
	}
}

// waitTicks waits until the poller has recorded n ticks (samples or
// errors), however long the machine takes.
func waitTicks(p *Poller, n int) {
	for {
		time.Sleep(2 * time.Millisecond)
		p.mu.Lock()
		got := len(p.series.Samples) + p.series.Errors
		p.mu.Unlock()
		if got >= n {
			return
		}
	}
}
