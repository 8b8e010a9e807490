package bundle

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rehearse/rehearse/internal/contract"
)

// Problem is one thing verify found wrong, located as precisely as it can be.
type Problem struct {
	File   string
	Server string
	// Load is the population's load as contract.Key.LoadLabel names it
	// ("64 clients", "2.5 req/s"), "" where none applies.
	Load  string
	Field string
	Msg   string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Server != "" {
		fmt.Fprintf(&b, ": server %s", p.Server)
		if p.Load != "" {
			fmt.Fprintf(&b, ", %s", p.Load)
		}
	}
	if p.Field != "" {
		fmt.Fprintf(&b, ": %s", p.Field)
	}
	fmt.Fprintf(&b, ": %s", p.Msg)
	return b.String()
}

// Tolerance for recomputed floats: relative, with an absolute floor for
// values near zero. JSON round-trips float64 exactly, so this only absorbs
// summation order.
const (
	relTol = 1e-9
	absTol = 1e-12
)

// Verify checks a bundle: every digest of SHA256SUMS, that every file is
// listed, the schema of results.json and every wave and record against SPEC
// §2, each wave's wall time, the mechanism-check maximum, and every aggregate recomputed from the
// raw records. It returns the problems found (none: the bundle verifies).
func Verify(dir string) []Problem {
	var probs []Problem
	probs = append(probs, verifySums(dir)...)
	res, err := ReadResults(dir)
	var invalid *InvalidError
	if errors.As(err, &invalid) {
		// VerifyResults reports each of its problems, with the rest.
		res, err = invalid.Results, nil
	}
	if err != nil {
		return append(probs, Problem{File: ResultsFile, Msg: trimPath(err.Error(), dir)})
	}
	probs = append(probs, VerifyResults(res)...)
	return probs
}

func trimPath(msg, dir string) string {
	return strings.TrimPrefix(msg, filepath.Join(dir, ResultsFile)+": ")
}

func verifySums(dir string) []Problem {
	listed, err := ReadSums(dir)
	if err != nil {
		return []Problem{{File: SumsFile, Msg: strings.TrimPrefix(err.Error(), filepath.Join(dir, SumsFile)+": ")}}
	}
	var probs []Problem
	seen := map[string]bool{}
	for _, d := range listed {
		seen[d.File] = true
		sum, err := HashFile(filepath.Join(dir, filepath.FromSlash(d.File)))
		if err != nil {
			if os.IsNotExist(err) {
				probs = append(probs, Problem{File: d.File, Msg: "listed in SHA256SUMS but missing"})
			} else {
				probs = append(probs, Problem{File: d.File, Msg: err.Error()})
			}
			continue
		}
		if sum != d.SHA256 {
			probs = append(probs, Problem{File: d.File, Msg: fmt.Sprintf("SHA-256 %s, SHA256SUMS says %s", sum, d.SHA256)})
		}
	}
	files, err := Files(dir)
	if err != nil {
		return append(probs, Problem{File: dir, Msg: err.Error()})
	}
	for _, f := range files {
		if !seen[f] {
			probs = append(probs, Problem{File: f, Msg: "not listed in SHA256SUMS"})
		}
	}
	return probs
}

// VerifyResults checks results.json's waves and records against SPEC §2,
// recomputes what it derives from its raw records and reports every
// difference.
func VerifyResults(res *Results) []Problem {
	probs := checkRecords(res)
	switch s := res.Provenance.OutputTokensSource; s {
	case "", SourceTokenizer, SourceUsage:
	default:
		probs = append(probs, Problem{File: ResultsFile, Field: "provenance.output_tokens_source",
			Msg: fmt.Sprintf("%q is not %s or %s", s, SourceTokenizer, SourceUsage)})
	}
	byWave := map[int][]contract.Record{}
	for _, r := range res.Records {
		byWave[r.Wave] = append(byWave[r.Wave], r)
	}
	if m := res.Workload.PercentileMethod; m != contract.PercentileMethod {
		probs = append(probs, Problem{File: ResultsFile, Field: "workload.percentile_method",
			Msg: fmt.Sprintf("stored %q, the contract's method is %q", m, contract.PercentileMethod)})
	}
	for i, w := range res.Waves {
		want := contract.WaveWallS(byWave[w.ID])
		if !near(w.WallS, want) {
			probs = append(probs, Problem{File: ResultsFile, Server: w.Server, Load: contract.KeyOf(w).LoadLabel(),
				Field: fmt.Sprintf("waves[%d].wall_s", i), Msg: fmt.Sprintf("stored %v, largest end_s of its records is %v", w.WallS, want)})
		}
		if w.Mode != contract.ModeOpen {
			want := contract.WaveReleaseSpreadS(byWave[w.ID])
			if !near(w.ReleaseSpreadS, want) {
				probs = append(probs, Problem{File: ResultsFile, Server: w.Server, Load: contract.KeyOf(w).LoadLabel(),
					Field: fmt.Sprintf("waves[%d].release_spread_s", i), Msg: fmt.Sprintf("stored %v, last start_s minus first of its records is %v", w.ReleaseSpreadS, want)})
			}
		}
	}
	if m := res.MechanismCheck; m != nil {
		var max *float64
		for _, s := range m.Series {
			if max == nil || s[1] > *max {
				v := s[1]
				max = &v
			}
		}
		if !closePtr(m.Max, max) {
			probs = append(probs, Problem{File: ResultsFile, Server: m.Server, Field: "mechanism_check.max",
				Msg: fmt.Sprintf("stored %s, series maximum %s", fmtPtr(m.Max), fmtPtr(max))})
		}
	}
	want := contract.Aggregates(res.Waves, res.Records, res.ServerNames(), res.BaselineName())
	got := map[contract.Key]contract.Aggregate{}
	first := map[contract.Key]int{}
	for i, a := range res.Aggregates {
		k := a.Key()
		if j, dup := first[k]; dup {
			probs = append(probs, Problem{File: ResultsFile, Server: a.Server, Load: a.LoadLabel(),
				Field: fmt.Sprintf("aggregates[%d]", i), Msg: fmt.Sprintf("duplicate of aggregates[%d]", j)})
			continue
		}
		first[k] = i
		got[k] = a
	}
	wantKeys := map[contract.Key]bool{}
	for _, w := range want {
		k := w.Key()
		wantKeys[k] = true
		load := w.LoadLabel()
		g, ok := got[k]
		if !ok {
			probs = append(probs, Problem{File: ResultsFile, Server: w.Server, Load: load, Field: "aggregates", Msg: "missing: the records have this population but no aggregate does"})
			continue
		}
		for _, d := range diffJSON(g, w) {
			probs = append(probs, Problem{File: ResultsFile, Server: w.Server, Load: load, Field: d.path, Msg: d.msg})
		}
	}
	for _, a := range res.Aggregates {
		if !wantKeys[a.Key()] {
			probs = append(probs, Problem{File: ResultsFile, Server: a.Server, Load: a.LoadLabel(), Field: "aggregates", Msg: "an aggregate with no recorded records behind it"})
		}
	}
	return probs
}

func near(a, b float64) bool {
	if a == b {
		return true
	}
	d := math.Abs(a - b)
	return d <= absTol || d <= relTol*math.Max(math.Abs(a), math.Abs(b))
}

func closePtr(a, b *float64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return near(*a, *b)
}

func fmtPtr(v *float64) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprint(*v)
}

type diff struct{ path, msg string }

// diffJSON compares the JSON forms of stored and recomputed values, numbers
// within tolerance, and names each difference by its JSON path.
func diffJSON(stored, recomputed any) []diff {
	var a, b any
	ja, _ := json.Marshal(stored)
	jb, _ := json.Marshal(recomputed)
	_ = json.Unmarshal(ja, &a)
	_ = json.Unmarshal(jb, &b)
	var out []diff
	walkDiff("", a, b, &out)
	return out
}

func walkDiff(path string, a, b any, out *[]diff) {
	switch bv := b.(type) {
	case map[string]any:
		av, ok := a.(map[string]any)
		if !ok {
			*out = append(*out, diff{path, fmt.Sprintf("stored %s, recomputed %s", short(a), short(b))})
			return
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		sorted := slices.Sorted(maps.Keys(keys))
		for _, k := range sorted {
			p := k
			if path != "" {
				p = path + "." + k
			}
			walkDiff(p, av[k], bv[k], out)
		}
	case []any:
		av, ok := a.([]any)
		if !ok || len(av) != len(bv) {
			*out = append(*out, diff{path, fmt.Sprintf("stored %s, recomputed %s", short(a), short(b))})
			return
		}
		for i := range bv {
			walkDiff(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i], out)
		}
	case float64:
		av, ok := a.(float64)
		if !ok || !near(av, bv) {
			*out = append(*out, diff{path, fmt.Sprintf("stored %s, recomputed %s", short(a), short(b))})
		}
	default:
		if fmt.Sprint(a) != fmt.Sprint(b) {
			*out = append(*out, diff{path, fmt.Sprintf("stored %s, recomputed %s", short(a), short(b))})
		}
	}
}

func short(v any) string {
	if v == nil {
		return "null"
	}
	j, _ := json.Marshal(v)
	s := string(j)
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
