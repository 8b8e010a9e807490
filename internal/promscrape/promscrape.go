package promscrape

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Value returns the value of metric in a Prometheus text exposition: the
// sum over its label sets (vLLM labels by model name) of the gauge, counter
// or untyped value. A metric that is absent is an error naming it.
//
// Only the metric's own lines are handed to the parser (the others are
// blanked, so line numbers in errors stay true): a vLLM page has dozens of
// histogram families, and the mechanism check reads one gauge many times a
// second.
func Value(in io.Reader, metric string) (float64, error) {
	data, err := io.ReadAll(in)
	if err != nil {
		return 0, err
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(onlyMetric(data, metric)))
	if err != nil {
		return 0, err
	}
	mf, ok := families[metric]
	if ok && (mf.GetType() == dto.MetricType_HISTOGRAM || mf.GetType() == dto.MetricType_SUMMARY) {
		return 0, fmt.Errorf("metric %q is a %s, not a gauge or counter", metric, mf.GetType())
	}
	if !ok || len(mf.GetMetric()) == 0 {
		return 0, fmt.Errorf("metric %q not exposed", metric)
	}
	var sum float64
	for _, m := range mf.GetMetric() {
		switch mf.GetType() {
		case dto.MetricType_GAUGE:
			sum += m.GetGauge().GetValue()
		case dto.MetricType_COUNTER:
			sum += m.GetCounter().GetValue()
		case dto.MetricType_UNTYPED:
			sum += m.GetUntyped().GetValue()
		default:
			return 0, fmt.Errorf("metric %q is a %s, not a gauge or counter", metric, mf.GetType())
		}
	}
	return sum, nil
}

// Scraper fetches one metric from one /metrics URL.
type Scraper struct {
	URL    string
	Metric string
	APIKey string
	Client *http.Client
}

// Scrape fetches the metrics page once and returns the metric's value.
func (s Scraper) Scrape(ctx context.Context) (float64, error) {
	var v float64
	err := s.get(ctx, func(body io.Reader) (err error) {
		v, err = Value(body, s.Metric)
		return err
	})
	return v, err
}

// Families fetches the metrics page once and parses all of it (Metric is
// not used), by family name.
func (s Scraper) Families(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	var fams map[string]*dto.MetricFamily
	err := s.get(ctx, func(body io.Reader) (err error) {
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err = p.TextToMetricFamilies(body)
		return err
	})
	return fams, err
}

// get fetches the page and hands its body to read; an error of read is
// returned naming the URL.
func (s Scraper) get(ctx context.Context, read func(io.Reader) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if s.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.APIKey)
	}
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return fmt.Errorf("GET %s: HTTP %d", s.URL, resp.StatusCode)
	}
	if err := read(resp.Body); err != nil {
		return fmt.Errorf("GET %s: %w", s.URL, err)
	}
	return nil
}

// Sample is one successful scrape. At is taken on the monotonic clock when
// the answer arrived.
type Sample struct {
	At    time.Time
	Value float64
}

// Series is what a Poller collected.
type Series struct {
	Samples []Sample
	// Errors counts failed scrapes; FirstError is the first one's message.
	Errors     int
	FirstError string
	// NonFinite counts scrapes whose value was NaN or ±Inf (the text
	// format allows them): they are dropped, since JSON cannot hold them
	// and one would make results.json and the journal unwritable.
	NonFinite int
}

// Offsets returns the samples as [t_s, value] pairs with t_s in seconds
// relative to origin (a wave's release), on the monotonic clock.
func (s Series) Offsets(origin time.Time) [][2]float64 {
	out := make([][2]float64, len(s.Samples))
	for i, smp := range s.Samples {
		out[i] = [2]float64{smp.At.Sub(origin).Seconds(), smp.Value}
	}
	return out
}

// Max returns the largest value, or nil without samples.
func (s Series) Max() *float64 {
	if len(s.Samples) == 0 {
		return nil
	}
	m := s.Samples[0].Value
	for _, smp := range s.Samples[1:] {
		m = max(m, smp.Value)
	}
	return &m
}

// add records one scrape: a failure is counted, a non-finite value is
// counted and dropped, anything else becomes a sample.
func (s *Series) add(at time.Time, v float64, err error) {
	switch {
	case err != nil:
		if s.Errors == 0 {
			s.FirstError = err.Error()
		}
		s.Errors++
	case math.IsNaN(v) || math.IsInf(v, 0):
		s.NonFinite++
	default:
		s.Samples = append(s.Samples, Sample{At: at, Value: v})
	}
}

// Poller scrapes every Period until stopped. A scrape that takes longer than
// the period delays the next one (ticks are dropped, never queued).
type Poller struct {
	scraper Scraper
	period  time.Duration
	cancel  context.CancelFunc
	done    chan struct{}

	mu     sync.Mutex
	series Series
}

// StartPoller begins polling at once and then every period.
func StartPoller(ctx context.Context, s Scraper, period time.Duration) (*Poller, error) {
	if period <= 0 {
		return nil, errors.New("promscrape: period must be positive")
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &Poller{scraper: s, period: period, cancel: cancel, done: make(chan struct{})}
	go p.run(ctx)
	return p, nil
}

func (p *Poller) run(ctx context.Context) {
	defer close(p.done)
	tick := time.NewTicker(p.period)
	defer tick.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, max(p.period*10, time.Second))
		v, err := p.scraper.Scrape(sctx)
		at := time.Now()
		cancel()
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		p.series.add(at, v, err)
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Stop ends polling and returns the series.
func (p *Poller) Stop() Series {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.series
	s.Samples = append([]Sample(nil), s.Samples...)
	return s
}

// onlyMetric keeps the lines of data that belong to metric (its samples and
// its HELP and TYPE comments) and empties every other line.
func onlyMetric(data []byte, metric string) []byte {
	name := []byte(metric)
	out := make([]byte, 0, 1024)
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if belongs(line, name) {
			out = append(out, line...)
		}
		out = append(out, '\n')
	}
	return out
}

func belongs(line, name []byte) bool {
	l := bytes.TrimLeft(line, " \t")
	if rest, ok := bytes.CutPrefix(l, []byte("#")); ok {
		rest = bytes.TrimLeft(rest, " \t")
		for _, kw := range [][]byte{[]byte("HELP"), []byte("TYPE")} {
			if r, ok := bytes.CutPrefix(rest, kw); ok {
				return followsName(bytes.TrimLeft(r, " \t"), name)
			}
		}
		return false
	}
	if followsName(l, name) {
		return true
	}
	// A histogram's or summary's samples, so that asking for one says what
	// it is instead of "not exposed".
	if r, ok := bytes.CutPrefix(l, name); ok {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if followsName(r, []byte(suffix)) {
				return true
			}
		}
	}
	return false
}

// followsName reports whether s starts with name followed by a label set,
// a blank or the end.
func followsName(s, name []byte) bool {
	r, ok := bytes.CutPrefix(s, name)
	return ok && (len(r) == 0 || r[0] == '{' || r[0] == ' ' || r[0] == '\t')
}
