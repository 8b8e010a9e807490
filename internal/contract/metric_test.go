package contract

import "testing"

// Every metric of the table reads its figure from an aggregate, and a name
// finds the metric it names.
func TestMetricTable(t *testing.T) {
	v := 2.0
	a := Aggregate{
		Goodput: Spread{Median: &v}, TTFT: Percentiles{P50: &v, P95: &v, P99: &v},
		TPOT: Percentiles{P50: &v, P95: &v}, ITL: Percentiles{P99: &v}, E2E: Percentiles{P95: &v},
		Failures: Failures{Count: 1, Total: 4, Rate: 0.25},
		SLO:      &SLOAggregate{SLOStanding: SLOStanding{Attainment: &v, RequestGoodput: Spread{Median: &v}}},
	}
	for _, m := range metrics {
		got := m.Value(a)
		if got == nil {
			t.Errorf("%s: no value", m.Name)
			continue
		}
		if want := map[bool]float64{true: 0.25, false: 2}[m.Name == "failure_rate"]; *got != want {
			t.Errorf("%s = %v, want %v", m.Name, *got, want)
		}
		if n, ok := MetricNamed(m.Name); !ok || n.Name != m.Name {
			t.Errorf("MetricNamed(%q) = %v, %v", m.Name, n.Name, ok)
		}
		if m.HigherIsBetter != (m.Name == "goodput" || m.Name == "attainment" || m.Name == "slo_goodput") {
			t.Errorf("%s: higher is better %v", m.Name, m.HigherIsBetter)
		}
	}
	if _, ok := MetricNamed("goodputs"); ok {
		t.Error("an unknown name found a metric")
	}
	if fr, _ := MetricNamed("failure_rate"); fr.Value(Aggregate{}) != nil {
		t.Error("a failure rate of no request is not 0")
	}
	for _, name := range []string{"attainment", "slo_goodput"} {
		if m, _ := MetricNamed(name); m.Value(Aggregate{}) != nil || m.AbsentReason() == "no successful request" {
			t.Errorf("%s of an aggregate without objectives: %v, absent %q", name, m.Value(Aggregate{}), m.AbsentReason())
		}
	}
}
