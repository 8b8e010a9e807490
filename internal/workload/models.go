package workload

import (
	"errors"
	"fmt"
	"strings"
)

// Assignments of models to prompts (vLLM's --lora-assignment).
const (
	// AssignRandom draws each prompt's model at random: vLLM's default.
	AssignRandom = "random"
	// AssignRoundRobin gives prompt i model i mod len(models).
	AssignRoundRobin = "round-robin"
)

// CheckModels says what makes names unfit as the models prompts are
// assigned (a LoRA adapter's name is what the request's model field
// carries): an empty list or name, or one with surrounding space or a
// control character; and an assignment other than AssignRandom or
// AssignRoundRobin.
func CheckModels(names []string, assignment string) error {
	if len(names) == 0 {
		return errors.New("no model names")
	}
	for i, n := range names {
		switch {
		case n == "":
			return fmt.Errorf("name %d of %d is empty", i+1, len(names))
		case strings.TrimSpace(n) != n:
			return fmt.Errorf("%q begins or ends with space", n)
		case strings.ContainsFunc(n, func(r rune) bool { return r < ' ' || r == 0x7f }):
			return fmt.Errorf("%q holds a control character", n)
		}
	}
	switch assignment {
	case AssignRandom, AssignRoundRobin:
	default:
		return fmt.Errorf("assignment %q: want %s or %s", assignment, AssignRandom, AssignRoundRobin)
	}
	return nil
}

// AssignModels gives each of n prompts one of models, as vLLM's benchmark
// gives each of its requests a LoRA module: in turn (AssignRoundRobin:
// prompt i gets models[i mod len(models)]), or at random (AssignRandom),
// prompt by prompt, as CPython's random.choice draws after
// random.seed(seed) (a negative seed as its absolute value, as CPython
// takes it): the same draws as vLLM's where nothing else drew from its
// global generator first (its random dataset draws from NumPy's).
func AssignModels(models []string, assignment string, seed int64, n int) ([]string, error) {
	if err := CheckModels(models, assignment); err != nil {
		return nil, err
	}
	out := make([]string, n)
	if assignment == AssignRoundRobin {
		for i := range out {
			out[i] = models[i%len(models)]
		}
		return out, nil
	}
	s := uint64(seed)
	if seed < 0 {
		s = uint64(-seed)
	}
	r := newPyRandom(s)
	for i := range out {
		out[i] = models[r.randBelow(len(models))]
	}
	return out, nil
}
