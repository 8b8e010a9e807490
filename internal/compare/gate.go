package compare

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/rehearse/rehearse/internal/contract"
)

// Gate is a CI check on the change from bundle A to bundle B: it trips when
// the change of Metric (a name of contract's metric table), for some server
// and load present in both, lies beyond Threshold in the direction of Op.
// Metric "capacity" tests each server's capacity answer (max_pass) instead,
// for every server searched in both bundles.
type Gate struct {
	// Text is the gate as written, e.g. "goodput<-5%".
	Text string
	// Server limits the gate to one server; "" tests every server.
	Server string
	Metric string
	// Op is '<' (trips when the change is below Threshold) or '>' (above).
	Op byte
	// Threshold is a fraction of A's value when Relative (−5% is −0.05),
	// otherwise a difference in the metric's unit (seconds, tok/s, a
	// fraction for failure_rate, clients for capacity).
	Threshold float64
	Relative  bool
}

// GateForm is the form ParseGate accepts.
const GateForm = "[SERVER:]METRIC<CHANGE or [SERVER:]METRIC>CHANGE, CHANGE a number with its sign and an optional unit: % (relative to A), s or ms (latency), pp (failure_rate, attainment); METRIC capacity tests each server's capacity answer (capacity<-10%)"

var gatePattern = regexp.MustCompile(`^(?:([^:<>\s]+):)?([a-z0-9_]+)\s*([<>])\s*([+-]?(?:\d+\.?\d*|\.\d+))\s*(%|pp|ms|s)?$`)

// ParseGate parses a gate such as "goodput<-5%", "ttft_p95>+10%",
// "failure_rate>+0.05", "naive:e2e_p95>+500ms", "attainment<-2%" or
// "attainment<-2pp", "capacity<-10%". Its errors show the form.
func ParseGate(s string) (Gate, error) {
	text := strings.TrimSpace(s)
	m := gatePattern.FindStringSubmatch(text)
	if m == nil {
		return Gate{}, fmt.Errorf("gate %q doesn't match %s (i.e. goodput<-5%%, ttft_p95>+10%%, failure_rate>+0.05)", s, GateForm)
	}
	if m[4][0] != '+' && m[4][0] != '-' {
		return Gate{}, fmt.Errorf("gate %q: a threshold is a change from A to B and needs its sign, e.g. %s%s-%s%s or %s%s+%s%s", s, m[2], m[3], m[4], m[5], m[2], m[3], m[4], m[5])
	}
	g := Gate{Text: text, Server: m[1], Metric: m[2], Op: m[3][0]}
	v, err := strconv.ParseFloat(m[4], 64)
	if err != nil {
		return Gate{}, fmt.Errorf("gate %q: threshold %q is not a number", s, m[4])
	}
	if g.Metric == CapacityMetric {
		switch m[5] {
		case "%":
			g.Threshold, g.Relative = v/100, true
		case "":
			g.Threshold = v
		default:
			return Gate{}, fmt.Errorf("gate %q: capacity is a number of clients: use %% (capacity<-10%%) or a number of clients (capacity<-4)", s)
		}
		return g, nil
	}
	met, ok := contract.MetricNamed(g.Metric)
	if !ok {
		return Gate{}, fmt.Errorf("gate %q: unknown metric %q (one of %s)", s, g.Metric, strings.Join(GateMetricNames(), ", "))
	}
	switch unit := m[5]; unit {
	case "%":
		if met.AbsoluteOnly {
			return Gate{}, fmt.Errorf("gate %q: %s takes an absolute change (+0.05 or +5pp); a relative change of a rate that may be 0 means nothing", s, g.Metric)
		}
		g.Threshold, g.Relative = v/100, true
	case "pp":
		if met.Unit != contract.Fraction {
			return Gate{}, fmt.Errorf("gate %q: pp (percentage points) is for fractions (failure_rate, attainment); use %% for a relative change of %s", s, g.Metric)
		}
		g.Threshold = v / 100
	case "s", "ms":
		if !met.Latency() {
			return Gate{}, fmt.Errorf("gate %q: %s is a unit of time, and %s is not a latency (use %% or a number in %s)", s, unit, g.Metric, unitName(met))
		}
		g.Threshold = v
		if unit == "ms" {
			g.Threshold = v / 1000
		}
	default:
		g.Threshold = v
	}
	return g, nil
}

// CapacityMetric is the gate metric of a capacity search: the max_pass of
// each server searched in both bundles (not an aggregate's figure, so not
// in contract's metric table).
const CapacityMetric = "capacity"

// GateMetricNames lists every metric a gate may test: contract's metric
// table, then capacity.
func GateMetricNames() []string { return append(contract.MetricNames(), CapacityMetric) }

func unitName(m contract.Metric) string {
	if m.Unit == contract.Fraction {
		return "a fraction"
	}
	return string(m.Unit)
}

// String returns the gate as written.
func (g Gate) String() string { return g.Text }

// GateList is a repeatable flag of gates (a pflag.Value).
type GateList []Gate

// String joins the gates.
func (l *GateList) String() string {
	parts := make([]string, len(*l))
	for i, g := range *l {
		parts[i] = g.Text
	}
	return strings.Join(parts, ",")
}

// Set parses and appends one gate.
func (l *GateList) Set(s string) error {
	g, err := ParseGate(s)
	if err != nil {
		return err
	}
	*l = append(*l, g)
	return nil
}

// Type names the flag's value in usage text.
func (l *GateList) Type() string { return "GATE" }
