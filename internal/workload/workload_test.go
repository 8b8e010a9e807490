package workload

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBuiltinPrompts(t *testing.T) {
	ps := BuiltinPrompts()
	if len(ps) != 8 {
		t.Fatalf("want eight built-in prompts, got %d", len(ps))
	}
	seen := map[string]bool{}
	for _, p := range ps {
		if strings.TrimSpace(p) == "" || seen[p] {
			t.Fatalf("empty or duplicate prompt %q", p)
		}
		seen[p] = true
	}
	ps[0] = "changed"
	if BuiltinPrompts()[0] == "changed" {
		t.Fatal("BuiltinPrompts returns shared storage")
	}
}

func TestPromptIndex(t *testing.T) {
	var got []int
	for i := range 10 {
		got = append(got, PromptIndex(i, 4))
	}
	if want := []int{0, 1, 2, 3, 0, 1, 2, 3, 0, 1}; !slices.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
}

func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadPrompts(t *testing.T) {
	got, err := LoadPrompts(writeFile(t, "p.jsonl", "{\"prompt\": \"a\\nb\", \"id\": 1}\n\n{\"prompt\":\"c\"}\r\n"))
	if err != nil || len(got) != 2 || got[0] != "a\nb" || got[1] != "c" {
		t.Fatalf("jsonl: %q %v", got, err)
	}
	got, err = LoadPrompts(writeFile(t, "p.txt", "first\r\n\n  second  \n"))
	if err != nil || len(got) != 2 || got[0] != "first" || got[1] != "  second  " {
		t.Fatalf("txt: %q %v", got, err)
	}
}

func TestLoadPromptsErrors(t *testing.T) {
	cases := []struct{ name, content, want string }{
		{"p.jsonl", "{\"prompt\":\"a\"}\n{\"text\":\"b\"}\n", `p.jsonl:2: no "prompt" field`},
		{"p.jsonl", "{\"prompt\":\"a\"}\nnot json\n", "p.jsonl:2: not a JSON object"},
		{"p.jsonl", "{\"prompt\":7}\n", `p.jsonl:1: "prompt" is 7, want a string`},
		{"p.jsonl", "{\"prompt\":\" \"}\n", `p.jsonl:1: empty "prompt"`},
		{"p.txt", "\n\n", "p.txt: no prompts"},
		{"p.csv", "a,b\n", `unknown prompts format ".csv"`},
	}
	for _, c := range cases {
		_, err := LoadPrompts(writeFile(t, c.name, c.content))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: error %v, want it to contain %q", c.name, c.content, err, c.want)
		}
	}
	if _, err := LoadPrompts(filepath.Join(t.TempDir(), "missing.txt")); err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("missing file: %v", err)
	}
}

func TestFixedSchedule(t *testing.T) {
	s, err := NewSchedule(ArrivalFixed, 4, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond, time.Second} {
		if got := s.Offset(i); got != want {
			t.Errorf("Offset(%d) = %v, want %v", i, got, want)
		}
	}
	if got := s.Offset(4000); got != 1000*time.Second {
		t.Errorf("Offset(4000) = %v: drift", got)
	}
}

// TestRandomSchedules checks rate, mean gap, dispersion and seeded
// reproducibility of the drawn schedules.
func TestRandomSchedules(t *testing.T) {
	const n = 40000
	cases := []struct {
		arrival    string
		rate, k    float64
		wantCV     float64 // coefficient of variation of the gaps
		wantCVTol  float64
		meanTolRel float64
	}{
		{ArrivalPoisson, 10, 0, 1, 0.03, 0.02},
		{ArrivalGamma, 10, 1, 1, 0.03, 0.02},
		{ArrivalGamma, 5, 0.25, 2, 0.08, 0.04},
		{ArrivalGamma, 20, 4, 0.5, 0.02, 0.02},
	}
	for _, c := range cases {
		s, err := NewSchedule(c.arrival, c.rate, c.k, 42)
		if err != nil {
			t.Fatal(err)
		}
		var sum, sumSq float64
		prev := s.Offset(0)
		if prev != 0 {
			t.Fatalf("%s: Offset(0) = %v", c.arrival, prev)
		}
		for i := 1; i <= n; i++ {
			o := s.Offset(i)
			if o < prev {
				t.Fatalf("%s: Offset(%d) %v < Offset(%d) %v", c.arrival, i, o, i-1, prev)
			}
			g := (o - prev).Seconds()
			sum += g
			sumSq += g * g
			prev = o
		}
		mean := sum / n
		sd := math.Sqrt(sumSq/n - mean*mean)
		if want := 1 / c.rate; math.Abs(mean-want)/want > c.meanTolRel {
			t.Errorf("%s k=%v: mean gap %.5f s, want %.5f", c.arrival, c.k, mean, want)
		}
		if cv := sd / mean; math.Abs(cv-c.wantCV) > c.wantCVTol {
			t.Errorf("%s k=%v: gap CV %.3f, want %.3f", c.arrival, c.k, cv, c.wantCV)
		}
		if rate := n / prev.Seconds(); math.Abs(rate-c.rate)/c.rate > c.meanTolRel {
			t.Errorf("%s k=%v: realized rate %.3f/s, want %.3f", c.arrival, c.k, rate, c.rate)
		}

		same, _ := NewSchedule(c.arrival, c.rate, c.k, 42)
		other, _ := NewSchedule(c.arrival, c.rate, c.k, 43)
		// Out of order on purpose: the offsets must not depend on call order.
		if same.Offset(500) != s.Offset(500) || same.Offset(3) != s.Offset(3) {
			t.Errorf("%s: same seed, different offsets", c.arrival)
		}
		if other.Offset(500) == s.Offset(500) {
			t.Errorf("%s: seeds 42 and 43 give the same offsets", c.arrival)
		}
	}
}

func TestScheduleErrors(t *testing.T) {
	cases := []struct {
		arrival string
		rate, k float64
		want    string
	}{
		{ArrivalFixed, 0, 0, "request rate 0"},
		{ArrivalPoisson, math.Inf(1), 0, "request rate +Inf"},
		{ArrivalGamma, 1, -1, "burstiness -1"},
		{ArrivalPoisson, 1, 2, "gamma arrivals only"},
		{"uniform", 1, 0, `arrival "uniform": want one of fixed, poisson, gamma`},
	}
	for _, c := range cases {
		_, err := NewSchedule(c.arrival, c.rate, c.k, 0)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v %v: %v, want %q", c.arrival, c.rate, c.k, err, c.want)
		}
	}
}
