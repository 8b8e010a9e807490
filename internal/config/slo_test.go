package config

import (
	"strings"
	"testing"
)

func TestSLOForms(t *testing.T) {
	for _, tc := range []struct {
		yaml, want string
		alpha      float64
	}{
		{"slo: {ttft: 500ms, tpot: 50ms, attainment: 0.9}", "ttft<=500ms,tpot<=50ms", 0.9},
		{"slo: {e2el: 2s, itl: 0.1s}", "itl<=100ms,e2el<=2s", 0.95},
		{`slo: "ttft<=500ms,tpot<=50ms"`, "ttft<=500ms,tpot<=50ms", 0.95},
	} {
		r, err := Parse([]byte(seedYAML+tc.yaml+"\n"), "r.yaml", "/cfg")
		if err != nil {
			t.Errorf("%s: %v", tc.yaml, err)
			continue
		}
		if r.SLO == nil || r.SLO.Objectives.String() != tc.want || r.SLO.Attainment != tc.alpha {
			t.Errorf("%s: got %+v", tc.yaml, r.SLO)
		}
		if b := r.SLO.Results(); b.Expr != tc.want || b.AttainmentTarget != tc.alpha {
			t.Errorf("%s: results block %+v", tc.yaml, b)
		}
	}
	r, err := Parse([]byte(seedYAML), "r.yaml", "/cfg")
	if err != nil || r.SLO != nil || r.SLO.Results() != nil {
		t.Errorf("no slo: got %+v, %v", r.SLO, err)
	}
}

func TestSLOBadInput(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"slo: {ttft: 500}", "r.yaml: slo.ttft: 500 has no unit (write 500ms or 500s)"},
		{"slo: {ttfb: 500ms}", "r.yaml: slo.ttfb: unknown key"},
		{"slo: {ttft: 500ms, attainment: 1}", "r.yaml: slo.attainment: attainment target 1 is not between 0 and 1"},
		{"slo: {ttft: 500ms, attainment: 0}", "slo.attainment: attainment target 0 is not between 0 and 1"},
		{"slo: {ttft: 500ms, attainment: high}", `slo.attainment: want a number between 0 and 1, got "high"`},
		{"slo: {attainment: 0.9}", "slo: no objective"},
		{"slo: {ttft: [1]}", "slo.ttft: want a time"},
		{`slo: "ttft<=500"`, `slo: "ttft<=500": limit "500" has no unit`},
		{`slo: "ttft<=1s,ttft<=2s"`, "given twice"},
		{"slo: [ttft]", "slo: want a mapping such as"},
	} {
		_, err := Parse([]byte(seedYAML+tc.yaml+"\n"), "r.yaml", "/cfg")
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line containing %q", tc.yaml, err, tc.want)
		}
	}
}
