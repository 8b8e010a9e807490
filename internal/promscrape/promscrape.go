package promscrape

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// LabelValue is a metric's value for one label set; Labels is the set
// written as in the exposition, sorted by name (`engine="0",model_name="m"`;
// "" for none).
type LabelValue struct {
	Labels string
	Value  float64
}

// Labeled is Value with the value of each label set besides their sum
// (vLLM's engine="0", engine="1" of a data-parallel engine), in the
// order of their labels.
func Labeled(in io.Reader, metric string) (float64, []LabelValue, error) {
	data, err := io.ReadAll(in)
	if err != nil {
		return 0, nil, err
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(onlyMetric(data, metric)))
	if err != nil {
		return 0, nil, err
	}
	mf, ok := families[metric]
	if ok && (mf.GetType() == dto.MetricType_HISTOGRAM || mf.GetType() == dto.MetricType_SUMMARY) {
		return 0, nil, fmt.Errorf("metric %q is a %s, not a gauge or counter", metric, mf.GetType())
	}
	if !ok || len(mf.GetMetric()) == 0 {
		return 0, nil, fmt.Errorf("metric %q not exposed", metric)
	}
	var sum float64
	sets := make([]LabelValue, 0, len(mf.GetMetric()))
	for _, m := range mf.GetMetric() {
		var v float64
		switch mf.GetType() {
		case dto.MetricType_GAUGE:
			v = m.GetGauge().GetValue()
		case dto.MetricType_COUNTER:
			v = m.GetCounter().GetValue()
		case dto.MetricType_UNTYPED:
			v = m.GetUntyped().GetValue()
		default:
			return 0, nil, fmt.Errorf("metric %q is a %s, not a gauge or counter", metric, mf.GetType())
		}
		sum += v
		sets = append(sets, LabelValue{Labels: labelString(m.GetLabel()), Value: v})
	}
	sort.Slice(sets, func(i, j int) bool { return sets[i].Labels < sets[j].Labels })
	return sum, sets, nil
}

func labelString(pairs []*dto.LabelPair) string {
	parts := make([]string, len(pairs))
	for i, lp := range pairs {
		parts[i] = lp.GetName() + "=" + strconv.Quote(lp.GetValue())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Scraper fetches one metric from one /metrics URL.
type Scraper struct {
	URL    string
	Metric string
	APIKey string
	Client *http.Client
}

// ScrapeLabeled fetches the metrics page once and returns the metric's value, with the value of each label set (Labeled).
func (s Scraper) ScrapeLabeled(ctx context.Context) (float64, []LabelValue, error) {
	var v float64
	var sets []LabelValue
	err := s.get(ctx, func(body io.Reader) (err error) {
		v, sets, err = Labeled(body, s.Metric)
		return err
	})
	return v, sets, err
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
	// LabelSets are the series of each label set of the metric, sorted
	// by labels, where a page had more than one (their sum is Samples).
	LabelSets []LabelSeries
	// Parts are the series of each scraper of a group poller (one per
	// replica), polled at the same ticks; Samples is then their sum at
	// the ticks every part answered. Nil for a single scraper.
	Parts []Series
}

// LabelSeries is the series of one label set.
type LabelSeries struct {
	Labels  string
	Samples []Sample
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

// addLabels records one successful scrape's label sets.
func (s *Series) addLabels(at time.Time, sets []LabelValue) {
	for _, lv := range sets {
		if math.IsNaN(lv.Value) || math.IsInf(lv.Value, 0) {
			continue
		}
		i := sort.Search(len(s.LabelSets), func(i int) bool { return s.LabelSets[i].Labels >= lv.Labels })
		if i == len(s.LabelSets) || s.LabelSets[i].Labels != lv.Labels {
			s.LabelSets = slices.Insert(s.LabelSets, i, LabelSeries{Labels: lv.Labels})
		}
		s.LabelSets[i].Samples = append(s.LabelSets[i].Samples, Sample{At: at, Value: lv.Value})
	}
}

// Poller scrapes every Period until stopped. A scrape that takes longer than
// the period delays the next one (ticks are dropped, never queued).
type Poller struct {
	scrapers []Scraper
	period   time.Duration
	cancel   context.CancelFunc
	done     chan struct{}

	mu     sync.Mutex
	series Series
}

// StartGroupPoller polls every scraper (one per replica of a server) at
// each tick, together: the series keeps each scraper's part and, as its
// samples, their sum at the ticks where every one answered.
func StartGroupPoller(ctx context.Context, scrapers []Scraper, period time.Duration) (*Poller, error) {
	if period <= 0 {
		return nil, errors.New("promscrape: period must be positive")
	}
	if len(scrapers) == 0 {
		return nil, errors.New("promscrape: nothing to poll")
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &Poller{scrapers: scrapers, period: period, cancel: cancel, done: make(chan struct{})}
	if len(scrapers) > 1 {
		p.series.Parts = make([]Series, len(scrapers))
	}
	go p.run(ctx)
	return p, nil
}

// scraped is one scraper's answer at a tick.
type scraped struct {
	at   time.Time
	v    float64
	sets []LabelValue
	err  error
}

func (p *Poller) run(ctx context.Context) {
	defer close(p.done)
	tick := time.NewTicker(p.period)
	defer tick.Stop()
	answers := make([]scraped, len(p.scrapers))
	for {
		var wg sync.WaitGroup
		for i, sc := range p.scrapers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sctx, cancel := context.WithTimeout(ctx, max(p.period*10, time.Second))
				v, sets, err := sc.ScrapeLabeled(sctx)
				answers[i] = scraped{at: time.Now(), v: v, sets: sets, err: err}
				cancel()
			}()
		}
		wg.Wait()
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		p.record(answers)
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// record adds one tick's answers: each part's, and their sum when every
// scraper answered (at the last answer's time).
func (p *Poller) record(answers []scraped) {
	if len(answers) == 1 {
		a := answers[0]
		p.series.add(a.at, a.v, a.err)
		if a.err == nil && len(a.sets) > 1 {
			p.series.addLabels(a.at, a.sets)
		}
		return
	}
	var sum float64
	var at time.Time
	var err error
	for i, a := range answers {
		part := &p.series.Parts[i]
		part.add(a.at, a.v, a.err)
		if a.err != nil {
			if err == nil {
				err = fmt.Errorf("replica %d: %w", i, a.err)
			}
			continue
		}
		if len(a.sets) > 1 {
			part.addLabels(a.at, a.sets)
		}
		sum += a.v
		if a.at.After(at) {
			at = a.at
		}
	}
	if err != nil {
		at = time.Now()
	}
	p.series.add(at, sum, err)
}

// Stop ends polling and returns the series.
func (p *Poller) Stop() Series {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.series.clone()
}

func (s Series) clone() Series {
	out := s
	out.Samples = append([]Sample(nil), s.Samples...)
	out.LabelSets = nil
	for _, ls := range s.LabelSets {
		out.LabelSets = append(out.LabelSets, LabelSeries{Labels: ls.Labels, Samples: append([]Sample(nil), ls.Samples...)})
	}
	if s.Parts != nil {
		out.Parts = make([]Series, len(s.Parts))
		for i, part := range s.Parts {
			out.Parts[i] = part.clone()
		}
	}
	return out
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
