package benchcmd

import (
	"slices"
	"testing"
)

func TestArgs(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"bench", "--goodput", "ttft:500", "tpot:50", "--num_prompts", "3"}, []string{"bench", "--goodput=ttft:500", "--goodput=tpot:50", "--num-prompts", "3"}},
		{[]string{"bench", "--metadata", "a=1", "b=2"}, []string{"bench", "--metadata=a=1", "--metadata=b=2"}},
		{[]string{"bench", "--goodput=ttft:5", "--model", "m"}, []string{"bench", "--goodput=ttft:5", "--model", "m"}},
		{[]string{"bench", "--goodput", "--model", "m"}, []string{"bench", "--goodput", "--model", "m"}},
		{[]string{"bench", "--random_input_len=8"}, []string{"bench", "--random-input-len=8"}},
		{[]string{"run", "--goodput", "a", "b"}, []string{"run", "--goodput", "a", "b"}},
	} {
		if got := Args(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Args(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
