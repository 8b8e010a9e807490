package bundle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
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
// listed, the schema and record fields of results.json, each wave's wall
// time, the mechanism-check maximum, and every aggregate recomputed from the
// raw records. It returns the problems found (none: the bundle verifies).
// Only regular files inside dir are opened: an entry outside it, a
// symbolic link, a FIFO or a device is a problem naming the entry.
func Verify(dir string) []Problem {
	probs, _ := VerifyContext(context.Background(), dir)
	return probs
}

// VerifyContext is Verify stopping when ctx ends, between files and
// within each: the error is then the interruption (IsInterrupted) and the
// problems are those found so far.
func VerifyContext(ctx context.Context, dir string) ([]Problem, error) {
	_, probs, err := verifyDir(ctx, dir)
	return probs, err
}

// verifyDir verifies dir and returns its results where they could be read.
func verifyDir(ctx context.Context, dir string) (*Results, []Problem, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, []Problem{fileProblem(err)}, nil
	}
	defer d.Close()
	probs, err := d.verifySums(ctx)
	if err != nil {
		return nil, dedupe(probs), err
	}
	res, err := d.results(ctx)
	if err != nil {
		if IsInterrupted(ctx, err) {
			return nil, dedupe(probs), err
		}
		return nil, dedupe(append(probs, fileProblem(err))), nil
	}
	probs = append(probs, VerifyResults(res)...)
	if ctx.Err() != nil {
		return nil, dedupe(probs), Interrupted(ctx)
	}
	return res, dedupe(probs), nil
}

// fileProblem is the problem of an entry that could not be read.
func fileProblem(err error) Problem {
	var fe *FileError
	if errors.As(err, &fe) {
		return Problem{File: fe.Name, Msg: fe.Msg}
	}
	return Problem{Msg: err.Error()}
}

// dedupe drops repeats of a problem (a FIFO named results.json is both a
// listed file that cannot be hashed and a results.json that cannot be read).
func dedupe(probs []Problem) []Problem {
	seen := map[Problem]bool{}
	out := probs[:0]
	for _, p := range probs {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// verifySums hashes every file SHA256SUMS lists and lists the bundle's
// files: every listed file must match, every file must be listed, and
// every entry must be a regular file. The error is only the interruption.
func (d *Dir) verifySums(ctx context.Context) ([]Problem, error) {
	listed, err := d.sums(ctx)
	if err != nil {
		if IsInterrupted(ctx, err) {
			return nil, err
		}
		return []Problem{fileProblem(err)}, nil
	}
	var probs []Problem
	seen := map[string]bool{}
	for _, l := range listed {
		seen[l.File] = true
		sum, err := d.Hash(ctx, l.File, limitFor(l.File))
		switch {
		case IsInterrupted(ctx, err):
			return probs, err
		case errors.Is(err, fs.ErrNotExist):
			probs = append(probs, Problem{File: l.File, Msg: "listed in SHA256SUMS but missing"})
		case err != nil:
			probs = append(probs, fileProblem(err))
		case sum != l.SHA256:
			probs = append(probs, Problem{File: l.File, Msg: fmt.Sprintf("SHA-256 %s, SHA256SUMS says %s", sum, l.SHA256)})
		}
	}
	files, bad, err := d.Files(ctx)
	if err != nil {
		if IsInterrupted(ctx, err) {
			return probs, err
		}
		return append(probs, fileProblem(err)), nil
	}
	for _, b := range bad {
		probs = append(probs, Problem{File: b.Name, Msg: b.Msg})
	}
	for _, f := range files {
		if !seen[f] {
			probs = append(probs, Problem{File: f, Msg: "not listed in SHA256SUMS"})
		}
	}
	return probs, nil
}

// VerifyResults recomputes what results.json derives from its raw records
// and reports every difference.
func VerifyResults(res *Results) []Problem {
	var probs []Problem
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
