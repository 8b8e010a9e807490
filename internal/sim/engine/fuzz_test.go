package engine

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/sim/profiles"
)

// FuzzParseProfile: a profile either parses into one that validates or
// fails with an error naming the source; never a panic.
func FuzzParseProfile(f *testing.F) {
	for _, n := range ProfileNames() {
		data, _ := profiles.FS.ReadFile(n + ".json")
		f.Add(data)
	}
	f.Add([]byte(`{"decode_step_s":[[1e308,1e308],[-1,0]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProfile(data, "fuzz.json")
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.json") {
				t.Fatalf("error does not name the source: %v", err)
			}
			return
		}
		for _, b := range []int{0, 1, 7, 64, 5000} {
			if s := p.StepS(b, b); !(s > 0) {
				t.Fatalf("StepS(%d) = %g for a valid profile", b, s)
			}
		}
		_ = p.NaturalOutputTokens(1, "x")
	})
}
