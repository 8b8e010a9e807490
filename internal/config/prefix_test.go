package config

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/workload"
)

func TestPrefixRepetitionMapping(t *testing.T) {
	r, err := Parse([]byte(promptsHead+"{source: prefix_repetition, num_prefixes: 4, prefix_len: 256, suffix_len: 32, count: 40, output_len: {fixed: 64}, seed: 2, ignore_eos: true}\n"), "r.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	spec := r.Workload.Prompts.Spec()
	want := workload.PrefixRepetition{NumPrefixes: 4, PrefixLen: 256, SuffixLen: 32, Count: 40, OutputLen: workload.Length{Fixed: 64}, Seed: 2, IgnoreEOS: true}
	if spec.Source != workload.SourcePrefixRepetition || spec.Prefix == nil || *spec.Prefix != want || spec.Synthetic != nil {
		t.Fatalf("spec %+v, prefix %+v", spec, spec.Prefix)
	}
	r, err = Parse([]byte(promptsHead+"{source: synthetic, input_len: {fixed: 8}, output_len: {fixed: 4}, count: 2, prefix_len: 100}\n"), "r.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Workload.Prompts.Spec().Synthetic; s == nil || s.PrefixLen != 100 {
		t.Fatalf("synthetic %+v", s)
	}
	r, err = Parse([]byte("model: {id: m}\nservers: [{name: s, launch: [x, '{port}'], max_model_len: 4096}]\n"), "r.yaml", t.TempDir())
	if err != nil || r.Servers[0].MaxModelLen != 4096 {
		t.Fatalf("max_model_len: %v, %+v", err, r)
	}
}

// TestPrefixRepetitionProblems: each bad key or value is one line naming
// the field and the value.
func TestPrefixRepetitionProblems(t *testing.T) {
	const ok = "source: prefix_repetition, num_prefixes: 2, prefix_len: 8, suffix_len: 4, count: 6, output_len: {fixed: 3}"
	with := func(old, new string) string { return "{" + strings.Replace(ok, old, new, 1) + "}" }
	cases := []struct{ yaml, want string }{
		{with("prefix_len: 8", "prefix_len: 0"), "workload.prompts.prefix_len: 0: must be at least 1"},
		{with("prefix_len: 8", "prefix_len: -5"), "workload.prompts.prefix_len: -5: must be at least 1"},
		{with("num_prefixes: 2", "num_prefixes: 0"), "workload.prompts.num_prefixes: 0: must be at least 1"},
		{with("suffix_len: 4", "suffix_len: 0"), "workload.prompts.suffix_len: 0: must be at least 1"},
		{with("count: 6", "count: 7"), "workload.prompts.count: 7 is not a multiple of num_prefixes 2"},
		{with("prefix_len: 8", "prefix_len: 99999999999"), "workload.prompts.prefix_len: 99999999999: must be at most 1048576"},
		{with("count: 6", "count: 999999998"), "workload.prompts.count: 999999998: must be at most 1000000"},
		{"{" + ok + ", input_len: {fixed: 3}}", "workload.prompts.input_len: the synthetic source's"},
		{"{" + ok + ", path: x}", "workload.prompts.path: the prefix_repetition source reads no file"},
		{"{" + ok + ", max_model_len: 9}", "not the prefix_repetition source's"},
		{with("prefix_len: 8", "prefix_len: big"), "workload.prompts.prefix_len: want a whole number"},
		{"{" + ok + ", num_suffixes: 3}", "workload.prompts.num_suffixes: unknown key"},
		{"{source: prefix_repetition, num_prefixes: 2, prefix_len: 8, suffix_len: 4, count: 6}", "workload.prompts.output_len: give fixed"},
		{"{source: synthetic, input_len: {fixed: 1}, output_len: {fixed: 1}, count: 1, prefix_len: -1}", "workload.prompts.prefix_len: -1: must be 0 (none) or more"},
		{"{source: synthetic, input_len: {fixed: 1}, output_len: {fixed: 1}, count: 1, num_prefixes: 2}", "num_prefixes and suffix_len are the prefix_repetition source's, not the synthetic source's"},
		{"{source: sharegpt, path: x, prefix_len: 3}", "num_prefixes, prefix_len and suffix_len are the prefix_repetition source's, not the sharegpt source's"},
		{"{source: builtin, prefix_len: 3}", "workload.prompts: the builtin source takes no parameters"},
		{"{source: file, path: x, suffix_len: 3}", "workload.prompts: the file source takes path alone"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(promptsHead+c.yaml+"\n"), "r.yaml", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.yaml, err, c.want)
		}
	}
	_, err := Parse([]byte("model: {id: m}\nservers: [{name: s, launch: [x, '{port}'], max_model_len: -1}]\n"), "r.yaml", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "servers[0].max_model_len: -1: must be 0 (unknown) or more") {
		t.Errorf("max_model_len -1: %v", err)
	}
}
