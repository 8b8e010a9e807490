package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/rehearse/rehearse/internal/contract"
)

// SLO is the rehearsal's per-request objectives and attainment target
// (SPEC §3): a mapping {ttft: 500ms, tpot: 50ms, itl: 100ms, e2el: 2s,
// attainment: 0.95}, or the string --slo takes, "ttft<=500ms,tpot<=50ms"
// (attainment then the default). Each limit carries its unit, ms or s.
type SLO struct {
	Objectives contract.Objectives
	// Attainment is the target α, strictly between 0 and 1 (default
	// contract.DefaultAttainment).
	Attainment float64
}

// sloAttainmentKey is the mapping key of the target.
const sloAttainmentKey = "attainment"

// UnmarshalYAML reads the mapping or the string form.
func (s *SLO) UnmarshalYAML(b []byte) error {
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return err
	}
	x, _, err := parseSLO(v)
	if err != nil {
		return err
	}
	*s = x
	return nil
}

// parseSLO reads a generic YAML value as an SLO; on error it also returns
// the key at fault ("" for the whole value).
func parseSLO(v any) (SLO, string, error) {
	s := SLO{Attainment: contract.DefaultAttainment}
	switch x := v.(type) {
	case string:
		o, err := contract.ParseObjectives(x)
		if err != nil {
			return SLO{}, "", err
		}
		s.Objectives = o
		return s, "", nil
	case map[string]any:
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range x {
				if !yield(k) {
					return
				}
			}
		}) {
			val := x[k]
			if k == sloAttainmentKey {
				a, ok := number(val)
				if !ok {
					return SLO{}, k, fmt.Errorf("want a number between 0 and 1, got %s", describe(val))
				}
				if err := contract.CheckAttainmentTarget(a); err != nil {
					return SLO{}, k, err
				}
				s.Attainment = a
				continue
			}
			if !slices.Contains(contract.ObjectiveNames, k) {
				return SLO{}, k, fmt.Errorf("unknown key (want %s or %s)", strings.Join(contract.ObjectiveNames, ", "), sloAttainmentKey)
			}
			str, ok := val.(string)
			if !ok {
				if _, isNum := number(val); isNum {
					return SLO{}, k, fmt.Errorf("%v has no unit (write %vms or %vs)", val, val, val)
				}
				return SLO{}, k, fmt.Errorf("want a time such as 500ms, got %s", describe(val))
			}
			if err := s.Objectives.SetLimit(k, strings.TrimSpace(str)); err != nil {
				return SLO{}, k, err
			}
		}
		if s.Objectives.Empty() {
			return SLO{}, "", fmt.Errorf("no objective (set at least one of %s)", strings.Join(contract.ObjectiveNames, ", "))
		}
		return s, "", nil
	}
	return SLO{}, "", fmt.Errorf("want a mapping such as {ttft: 500ms, tpot: 50ms, attainment: 0.95} or a string such as \"ttft<=500ms,tpot<=50ms\", got %s", describe(v))
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case uint64:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// Results is the results.json block of the SLO.
func (s *SLO) Results() *contract.SLO {
	if s == nil {
		return nil
	}
	return contract.NewSLO(s.Objectives, s.Attainment)
}
