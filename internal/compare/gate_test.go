package compare

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

func TestParseGate(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Gate
	}{
		{"goodput<-5%", Gate{Text: "goodput<-5%", Metric: "goodput", Op: '<', Threshold: -0.05, Relative: true}},
		{"ttft_p95>+10%", Gate{Text: "ttft_p95>+10%", Metric: "ttft_p95", Op: '>', Threshold: 0.10, Relative: true}},
		{"failure_rate>+0.05", Gate{Text: "failure_rate>+0.05", Metric: "failure_rate", Op: '>', Threshold: 0.05}},
		{"failure_rate>+5pp", Gate{Text: "failure_rate>+5pp", Metric: "failure_rate", Op: '>', Threshold: 0.05}},
		{"vllm:e2e_p95>+500ms", Gate{Text: "vllm:e2e_p95>+500ms", Server: "vllm", Metric: "e2e_p95", Op: '>', Threshold: 0.5}},
		{" tpot_p95 > +0.002s ", Gate{Text: "tpot_p95 > +0.002s", Metric: "tpot_p95", Op: '>', Threshold: 0.002}},
		{"goodput<-50", Gate{Text: "goodput<-50", Metric: "goodput", Op: '<', Threshold: -50}},
		{"attainment<-2%", Gate{Text: "attainment<-2%", Metric: "attainment", Op: '<', Threshold: -0.02, Relative: true}},
		{"attainment<-2pp", Gate{Text: "attainment<-2pp", Metric: "attainment", Op: '<', Threshold: -0.02}},
		{"slo_goodput<-10%", Gate{Text: "slo_goodput<-10%", Metric: "slo_goodput", Op: '<', Threshold: -0.1, Relative: true}},
		{"goodput<-.5%", Gate{Text: "goodput<-.5%", Metric: "goodput", Op: '<', Threshold: -0.005, Relative: true}},
		{"capacity<-10%", Gate{Text: "capacity<-10%", Metric: "capacity", Op: '<', Threshold: -0.1, Relative: true}},
		{"vllm:capacity<-4", Gate{Text: "vllm:capacity<-4", Server: "vllm", Metric: "capacity", Op: '<', Threshold: -4}},
	} {
		got, err := ParseGate(c.in)
		if err != nil {
			t.Errorf("ParseGate(%q): %v", c.in, err)
			continue
		}
		if got.Text != c.want.Text || got.Server != c.want.Server || got.Metric != c.want.Metric || got.Op != c.want.Op ||
			got.Relative != c.want.Relative || !near(got.Threshold, c.want.Threshold) {
			t.Errorf("ParseGate(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func near(a, b float64) bool { d := a - b; return d < 1e-12 && d > -1e-12 }

func TestParseGateErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"goodput", `gate "goodput" doesn't match [SERVER:]METRIC<CHANGE`},
		{"goodput=-5%", "doesn't match"},
		{"goodput<-5%%", "doesn't match"},
		{"goodput<five", "(i.e. goodput<-5%, ttft_p95>+10%, failure_rate>+0.05)"},
		{"goodputs<-5%", `unknown metric "goodputs" (one of goodput, ttft_p50`},
		{"failure_rate>+5%", "failure_rate takes an absolute change (+0.05 or +5pp)"},
		{"goodput<-5pp", "pp (percentage points) is for fractions (failure_rate, attainment)"},
		{"goodput<-5ms", "ms is a unit of time, and goodput is not a latency (use % or a number in tok/s)"},
		{"failure_rate>+1s", "use % or a number in a fraction"},
		{"goodput<5", `a threshold is a change from A to B and needs its sign, e.g. goodput<-5 or goodput<+5`},
		{"ttft_p95>10%", "e.g. ttft_p95>-10% or ttft_p95>+10%"},
		{"", "doesn't match"},
		{"capacity<-5ms", "capacity is a number of clients: use % (capacity<-10%) or a number of clients (capacity<-4)"},
		{"capacity<-5pp", "capacity is a number of clients"},
		{"capacity<5%", "e.g. capacity<-5% or capacity<+5%"},
		{"capacities<-5%", "slo_goodput, capacity)"},
	} {
		_, err := ParseGate(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseGate(%q) error %v, want one containing %q", c.in, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseGate(%q): error spans lines: %q", c.in, err)
		}
	}
}

func TestGateListFlag(t *testing.T) {
	var l GateList
	for _, s := range []string{"goodput<-5%", "ttft_p95>+10%"} {
		if err := l.Set(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Set("nonsense"); err == nil {
		t.Error("bad gate accepted")
	}
	if got := l.String(); got != "goodput<-5%,ttft_p95>+10%" || len(l) != 2 || l.Type() != "GATE" {
		t.Errorf("GateList = %q (%d), type %s", got, len(l), l.Type())
	}
}

func FuzzParseGate(f *testing.F) {
	for _, s := range []string{"goodput<-5%", "a:ttft_p95>+10ms", "failure_rate>+5pp", "x<<1", ":goodput<1", "capacity<-10%", "b:capacity>+2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseGate(s)
		if err != nil {
			return
		}
		if _, ok := contract.MetricNamed(g.Metric); !(ok || g.Metric == CapacityMetric) || (g.Op != '<' && g.Op != '>') {
			t.Fatalf("ParseGate(%q) accepted %+v", s, g)
		}
		again, err := ParseGate(g.Text)
		if err != nil || again != g {
			t.Fatalf("reparsing %q: %+v, %v", g.Text, again, err)
		}
	})
}
