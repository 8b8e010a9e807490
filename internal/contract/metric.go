package contract

// Unit is the unit of a Metric's value.
type Unit string

// The units of the metric table.
const (
	TokensPerSecond   Unit = "tok/s"
	RequestsPerSecond Unit = "req/s"
	Seconds           Unit = "s"
	// Fraction is a share of requests, 0 to 1.
	Fraction Unit = ""
)

// Metric is a figure read from an aggregate under the name gates
// (`compare --fail-if goodput<-5%`) and objectives use.
type Metric struct {
	Name string
	Unit Unit
	// HigherIsBetter is true for goodput, false for latencies and the
	// failure rate.
	HigherIsBetter bool
	// Value reads the figure; nil where the aggregate has none (no
	// successful request, or no request at all).
	Value func(Aggregate) *float64
	// AbsoluteOnly is true for a fraction that is often 0 (the failure
	// rate), whose relative change means nothing: gates test it in
	// absolute terms only.
	AbsoluteOnly bool
	// Absent says why an aggregate may have no value.
	Absent string
}

// Latency reports whether the metric is a time, which thresholds in s or ms
// may test.
func (m Metric) Latency() bool { return m.Unit == Seconds }

// metrics is the metric table, in the order it is listed to people.
var metrics = []Metric{
	{Name: "goodput", Unit: TokensPerSecond, HigherIsBetter: true, Value: func(a Aggregate) *float64 { return a.Goodput.Median }},
	{Name: "ttft_p50", Unit: Seconds, Value: func(a Aggregate) *float64 { return a.TTFT.P50 }},
	{Name: "ttft_p95", Unit: Seconds, Value: func(a Aggregate) *float64 { return a.TTFT.P95 }},
	{Name: "ttft_p99", Unit: Seconds, Value: func(a Aggregate) *float64 { return a.TTFT.P99 }},
	{Name: "tpot_p50", Unit: Seconds, Value: func(a Aggregate) *float64 { return a.TPOT.P50 }},
	{Name: "tpot_p95", Unit: Seconds, Value: func(a Aggregate) *float64 { return a.TPOT.P95 }},
	{Name: "itl_p99", Unit: Seconds, Value: func(a Aggregate) *float64 { return a.ITL.P99 }},
	{Name: "e2e_p95", Unit: Seconds, Value: func(a Aggregate) *float64 { return a.E2E.P95 }},
	{Name: "failure_rate", Unit: Fraction, AbsoluteOnly: true, Value: func(a Aggregate) *float64 {
		if a.Failures.Total == 0 {
			return nil
		}
		r := a.Failures.Rate
		return &r
	}},
	// attainment and slo_goodput are the SLO figures (ApplySLO): absent
	// from aggregates of a rehearsal without objectives.
	{Name: "attainment", Unit: Fraction, HigherIsBetter: true, Absent: "no objectives, or no request", Value: func(a Aggregate) *float64 {
		if a.SLO == nil {
			return nil
		}
		return a.SLO.Attainment
	}},
	{Name: "slo_goodput", Unit: RequestsPerSecond, HigherIsBetter: true, Absent: "no objectives, or no request", Value: func(a Aggregate) *float64 {
		if a.SLO == nil {
			return nil
		}
		return a.SLO.RequestGoodput.Median
	}},
}

// AbsentReason says why an aggregate may have no value of the metric: "no
// successful request" unless the metric says otherwise.
func (m Metric) AbsentReason() string {
	if m.Absent != "" {
		return m.Absent
	}
	return "no successful request"
}

// MetricNamed finds a metric of the table by name.
func MetricNamed(name string) (Metric, bool) {
	for _, m := range metrics {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}

// MetricNames lists the names of the metric table, in its order.
func MetricNames() []string {
	out := make([]string, len(metrics))
	for i, m := range metrics {
		out[i] = m.Name
	}
	return out
}
