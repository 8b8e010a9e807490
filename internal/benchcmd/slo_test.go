package benchcmd

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
)

// run's --slo and --attainment replace the file's slo: each on its own.
func TestSLOFlagsReplaceTheFiles(t *testing.T) {
	fileSLO := func() *config.Rehearsal {
		o, _ := contract.ParseObjectives("ttft<=1s")
		return &config.Rehearsal{SLO: &config.SLO{Objectives: o, Attainment: 0.8}}
	}
	for _, tc := range []struct {
		o    SLO
		want string
	}{
		{SLO{}, "ttft<=1s at 0.8"},
		{SLO{attainment: 0.99, attainmentSet: true}, "ttft<=1s at 0.99"},
		{SLO{expr: "tpot<=20ms", attainment: 0.95}, "tpot<=20ms at 0.8"},
		{SLO{expr: "tpot<=20ms", attainment: 0.9, attainmentSet: true}, "tpot<=20ms at 0.9"},
	} {
		cfg := fileSLO()
		if err := tc.o.Apply(cfg); err != nil {
			t.Fatal(err)
		}
		if got := cfg.SLO.Objectives.String() + " at " + strconv.FormatFloat(cfg.SLO.Attainment, 'g', -1, 64); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.o, got, tc.want)
		}
	}
	o := SLO{expr: "e2el<=2s", attainment: 0.9, attainmentSet: true}
	if got := strings.Join(o.Args(), " "); got != "--slo=e2el<=2s --attainment=0.9" {
		t.Errorf("args %q", got)
	}
	cfg := &config.Rehearsal{}
	if err := (&SLO{expr: "ttft<=5ms", attainment: 0.95}).Apply(cfg); err != nil || cfg.SLO.Attainment != 0.95 {
		t.Errorf("no file slo: %+v, %v", cfg.SLO, err)
	}
}
