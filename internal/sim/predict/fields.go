package predict

import (
	"fmt"
	"math"
	"sort"

	"github.com/rehearse/rehearse/internal/bundle"
)

// Fields are the request fields of a workload's extra_body that the
// simulated engine models.
type Fields struct {
	IgnoreEOS bool
	MinTokens int
}

// FieldsOf checks that a prediction can send a rehearsal's workload (as
// results.json keeps it) and reads the request fields of its extra_body
// that the engine models, ignore_eos and min_tokens; the others come back
// as notes. Prompts that are whole conversations and multi-turn sessions
// are an error.
func FieldsOf(wl bundle.Workload) (Fields, []string, error) {
	if err := checkModelled(wl); err != nil {
		return Fields{}, nil, err
	}
	return requestFields(wl.ExtraBody)
}

// checkModelled refuses what a prediction cannot send: prompts that are
// whole conversations, multi-turn sessions.
func checkModelled(wl bundle.Workload) error {
	switch {
	case len(wl.PromptMessages) > 0:
		return fmt.Errorf("sim: the prompts are whole conversations; a prediction sends one user message")
	case len(wl.Sessions) > 0:
		return fmt.Errorf("sim: the workload runs multi-turn sessions, which a prediction does not model")
	}
	return nil
}

// requestFields reads the request fields of a workload's extra_body that
// the simulated engine models, ignore_eos and min_tokens; the others come
// back as notes.
func requestFields(extra map[string]any) (Fields, []string, error) {
	var f Fields
	var notes []string
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := extra[k]
		switch k {
		case "ignore_eos":
			b, ok := v.(bool)
			if !ok {
				return Fields{}, nil, fmt.Errorf("sim: bundle workload.extra_body.ignore_eos = %v: want true or false", v)
			}
			f.IgnoreEOS = b
		case "min_tokens":
			n, ok := number(v)
			if !ok || n < 0 || n != math.Trunc(n) {
				return Fields{}, nil, fmt.Errorf("sim: bundle workload.extra_body.min_tokens = %v: want a whole number >= 0", v)
			}
			f.MinTokens = int(n)
		default:
			notes = append(notes, fmt.Sprintf("workload.extra_body.%s is sent by the rehearsal but not modelled by the simulator", k))
		}
	}
	return f, notes, nil
}

// number is v as a float64: a JSON number, or an integer a YAML file gave.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}
