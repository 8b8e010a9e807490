package workload

import (
	"slices"
	"strings"
	"testing"
)

// Round-robin gives prompt i model i mod n; random draws as CPython's
// random.choice does after random.seed(seed), which is what vLLM's
// --lora-assignment random draws for its requests where its dataset drew
// nothing from Python's generator first (the random dataset). The
// expected letters are CPython 3's
// "random.seed(s); [random.choice('abc') for _ in range(20)]".
func TestAssignModels(t *testing.T) {
	got, err := AssignModels([]string{"a", "b", "c"}, AssignRoundRobin, 99, 7)
	if err != nil || strings.Join(got, "") != "abcabca" {
		t.Fatalf("round-robin: %q, %v", got, err)
	}
	for _, c := range []struct {
		seed   int64
		models string
		want   string
	}{
		{0, "abc", "bbabcbbbbbcacabaacbc"},
		{1, "abc", "acababbbcbaababbcacb"},
		{12345, "abc", "bcabbabcbababbccacca"},
		{-12345, "abc", "bcabbabcbababbccacca"}, // CPython seeds with |seed|
		{7, "abcdefg", "cbdfaageaceaebaaddab"},
		{3, "z", strings.Repeat("z", 20)},
	} {
		got, err := AssignModels(strings.Split(c.models, ""), AssignRandom, c.seed, 20)
		if err != nil || strings.Join(got, "") != c.want {
			t.Errorf("random, seed %d over %q: %q, %v; want CPython's %q", c.seed, c.models, strings.Join(got, ""), err, c.want)
		}
	}
	a, _ := AssignModels([]string{"x", "y"}, AssignRandom, 5, 50)
	b, _ := AssignModels([]string{"x", "y"}, AssignRandom, 5, 50)
	if !slices.Equal(a, b) {
		t.Error("the same seed assigned other models")
	}
}

func TestCheckModels(t *testing.T) {
	for _, c := range []struct {
		names      []string
		assignment string
		want       string
	}{
		{nil, AssignRandom, "no model names"},
		{[]string{"a", ""}, AssignRandom, "name 2 of 2 is empty"},
		{[]string{" a"}, AssignRandom, "begins or ends with space"},
		{[]string{"a\nb"}, AssignRandom, "control character"},
		{[]string{"a"}, "weighted", `assignment "weighted": want random or round-robin`},
	} {
		err := CheckModels(c.names, c.assignment)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckModels(%q, %q) = %v, want %q", c.names, c.assignment, err, c.want)
		}
		if _, err := AssignModels(c.names, c.assignment, 0, 3); err == nil {
			t.Errorf("AssignModels(%q, %q) assigned", c.names, c.assignment)
		}
	}
	if err := CheckModels([]string{"sql-lora", "org/adapter:v2"}, AssignRoundRobin); err != nil {
		t.Error(err)
	}
}
