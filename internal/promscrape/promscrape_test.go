package promscrape

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const page = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="a"} 40
vllm:num_requests_running{model_name="b"} 24
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model_name="a"} 1234
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1"} 3
vllm:time_to_first_token_seconds_bucket{le="+Inf"} 4
vllm:time_to_first_token_seconds_sum 0.5
vllm:time_to_first_token_seconds_count 4
`

func TestValue(t *testing.T) {
	for _, c := range []struct {
		metric string
		want   float64
		err    string
	}{
		{"vllm:num_requests_running", 64, ""},
		{"vllm:generation_tokens_total", 1234, ""},
		{"vllm:num_requests_waiting", 0, `metric "vllm:num_requests_waiting" not exposed`},
		{"vllm:time_to_first_token_seconds", 0, "is a HISTOGRAM, not a gauge or counter"},
	} {
		got, err := value(strings.NewReader(page), c.metric)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err = %v, want %q", c.metric, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s = %v, %v; want %v", c.metric, got, err, c.want)
		}
	}
	_, err := value(strings.NewReader("other 1\nok{a=\"x\"} 1\nok{ 2\n"), "ok")
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("malformed page: %v", err)
	}
	// Lines of other metrics are not the mechanism check's business, and
	// a name that only starts like the metric's is another metric.
	v, err := value(strings.NewReader("broken{ 2\nok_total 5\n# TYPE ok gauge\nok 1\n"), "ok")
	if err != nil || v != 1 {
		t.Errorf("got %v, %v; want 1", v, err)
	}
}

func TestPollerSeriesOnTheMonotonicClock(t *testing.T) {
	var running atomic.Int64
	var fail atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running %d\n", running.Load())
	}))
	defer srv.Close()
	origin := time.Now()
	p, err := StartGroupPoller(context.Background(), []Scraper{{URL: srv.URL, Metric: "vllm:num_requests_running", Client: srv.Client()}}, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	waitFor := func(cond func(Series) bool) {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			p.mu.Lock()
			ok := cond(p.series)
			p.mu.Unlock()
			if ok {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatal("poller made no progress")
	}
	waitFor(func(s Series) bool { return len(s.Samples) >= 2 })
	running.Store(64)
	waitFor(func(s Series) bool { return len(s.Samples) > 0 && s.Samples[len(s.Samples)-1].Value == 64 })
	running.Store(3)
	waitFor(func(s Series) bool { return s.Samples[len(s.Samples)-1].Value == 3 })
	fail.Store(true)
	waitFor(func(s Series) bool { return s.Errors > 0 })
	s := p.Stop()
	n := len(s.Samples)
	time.Sleep(30 * time.Millisecond)
	if after := p.Stop(); len(after.Samples) != n {
		t.Error("poller kept sampling after Stop")
	}
	if m := s.Max(); m == nil || *m != 64 {
		t.Errorf("max = %v, want 64", m)
	}
	if !strings.Contains(s.FirstError, "HTTP 500") {
		t.Errorf("first error = %q", s.FirstError)
	}
	off := s.Offsets(origin)
	for i := range off {
		if off[i][0] < 0 || (i > 0 && off[i][0] < off[i-1][0]) {
			t.Fatalf("offsets not increasing from the origin: %v", off)
		}
	}
	if gap := (off[len(off)-1][0] - off[0][0]) / float64(len(off)-1); gap < 0.005 {
		t.Errorf("samples %v s apart on average with a 10 ms period", gap)
	}
	if (Series{}).Max() != nil {
		t.Error("max of nothing is not nil")
	}
}

func FuzzValue(f *testing.F) {
	f.Add(page)
	f.Add("x 1\n")
	f.Fuzz(func(t *testing.T, text string) {
		_, _ = value(strings.NewReader(text), "vllm:num_requests_running")
	})
}

// BenchmarkValue parses a metrics page the size of vLLM's (about 50
// families, histograms included): the cost of one mechanism-check sample.
func BenchmarkValue(b *testing.B) {
	var page strings.Builder
	page.WriteString("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 64\n")
	for f := range 50 {
		fmt.Fprintf(&page, "# TYPE vllm:family_%d histogram\n", f)
		for _, le := range []string{"0.001", "0.01", "0.1", "1", "10", "+Inf"} {
			fmt.Fprintf(&page, "vllm:family_%d_bucket{model_name=\"m\",le=\"%s\"} %d\n", f, le, f)
		}
		fmt.Fprintf(&page, "vllm:family_%d_sum{model_name=\"m\"} 1.5\nvllm:family_%d_count{model_name=\"m\"} 3\n", f, f)
	}
	text := page.String()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := value(strings.NewReader(text), "vllm:num_requests_running"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestPollerDropsNonFiniteValues(t *testing.T) {
	// The text format allows NaN and ±Inf and Value returns them; a series
	// holding one could not be written as JSON, so the poller counts and
	// drops them.
	var n atomic.Int64
	values := []string{"NaN", "+Inf", "-Inf", "5"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := values[min(int(n.Add(1))-1, len(values)-1)]
		fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running %s\n", v)
	}))
	defer srv.Close()
	if v, err := value(strings.NewReader("m NaN\n"), "m"); err != nil || !math.IsNaN(v) {
		t.Fatalf("Value(NaN) = %v, %v: the parser is expected to pass NaN through", v, err)
	}
	p, err := StartGroupPoller(context.Background(), []Scraper{{URL: srv.URL, Metric: "vllm:num_requests_running", Client: srv.Client()}}, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for {
		p.mu.Lock()
		done := len(p.series.Samples) > 0
		p.mu.Unlock()
		if done {
			break
		}
		time.Sleep(time.Millisecond)
	}
	s := p.Stop()
	if s.NonFinite != 3 || s.Errors != 0 {
		t.Errorf("non-finite %d, errors %d: want 3 and 0", s.NonFinite, s.Errors)
	}
	for _, smp := range s.Samples {
		if math.IsNaN(smp.Value) || math.IsInf(smp.Value, 0) {
			t.Fatalf("sample %v kept", smp.Value)
		}
	}
	if m := s.Max(); m == nil || *m != 5 {
		t.Errorf("max = %v, want 5", m)
	}
}

// value is the metric's value summed over its label sets, as Labeled
// gives it.
func value(in io.Reader, metric string) (float64, error) {
	sum, _, err := Labeled(in, metric)
	return sum, err
}
