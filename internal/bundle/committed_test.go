package bundle_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// The bundles committed under rehearsals/ are evidence: they must keep
// verifying (digests, schema, every record, every aggregate recomputed, every
// output_tokens re-counted with the tokenizer their provenance names) as the
// code moves.
func TestCommittedBundlesVerify(t *testing.T) {
	sums, err := filepath.Glob("../../rehearsals/*/SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) == 0 {
		t.Fatal("no committed bundle found under rehearsals/")
	}
	find := func(p bundle.Provenance) (bundle.Counter, error) {
		// The digest alone: no cache, no Hub, only the embedded file.
		tok, _, err := tokenizer.Resolve(context.Background(), tokenizer.Request{SHA256: p.Tokenizer.SHA256, Variant: p.Tokenizer.Variant})
		if err != nil {
			return nil, err
		}
		return tok, nil
	}
	for _, s := range sums {
		dir := filepath.Dir(s)
		rep, _ := bundle.VerifyWith(context.Background(), dir, bundle.Options{Tokenizer: find})
		for _, p := range rep.Problems {
			t.Errorf("%s: %s", dir, p)
		}
		// Besides the re-count, a note may only say that a capacity
		// search's stops predate the recorded stop rule (SPEC §8): those
		// are accepted on their verdicts, and the note says so.
		recounted, predate := 0, 0
		for _, n := range rep.Notes {
			switch {
			case strings.Contains(n, "re-counted from their text"):
				recounted++
			case strings.Contains(n, "predate the rule"):
				predate++
			default:
				t.Errorf("%s: unexpected note %q", dir, n)
			}
		}
		if recounted != 1 {
			t.Errorf("%s: output_tokens must be re-counted, notes say %q", dir, rep.Notes)
		}
		if filepath.Base(dir) == "h200-capacity" && predate == 0 {
			t.Errorf("%s: its probes record no ended_by, yet no note says their stops are not replayed: %q", dir, rep.Notes)
		}
	}
}

// exactBundles are the committed bundles of a real engine serving a model
// whose text re-tokenizes exactly (rehearse model write: whole-word
// tokens), so that on every record, of every kind, the text re-counted
// with the tokenizer provenance names equals the server's own
// usage.completion_tokens, and output_tokens holds that count.
var exactBundles = []string{"ollama-cpu", "ollama-cpu-sustained"}

func TestCommittedRealEngineBundlesAreExact(t *testing.T) {
	for _, name := range exactBundles {
		dir := filepath.Join("../../rehearsals", name)
		res, err := bundle.ReadResults(dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p := res.Provenance
		tok, _, err := tokenizer.Resolve(context.Background(), tokenizer.Request{SHA256: p.Tokenizer.SHA256, Variant: p.Tokenizer.Variant})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n := 0
		for i, r := range res.Records {
			if r.UsageCompletionTokens == nil {
				t.Errorf("%s: record %d (%s, %s at %d clients) carries no usage", name, i, r.Kind, r.Server, r.Concurrency)
				continue
			}
			n++
			if usage, recount := *r.UsageCompletionTokens, tok.Count(r.Text); recount != usage || r.OutputTokens != usage {
				t.Errorf("%s: record %d (%s, %s at %d clients): re-counted %d, output_tokens %d, usage %d",
					name, i, r.Kind, r.Server, r.Concurrency, recount, r.OutputTokens, usage)
			}
		}
		for _, a := range res.Aggregates {
			if u := a.UsageDisagreement; u == nil || u.Count != 0 || u.Compared == 0 {
				t.Errorf("%s: %s at %s: usage_disagreement %+v", name, a.Server, a.LoadLabel(), u)
			}
		}
		if n == 0 || !p.Model.RandomWeights {
			t.Errorf("%s: %d records with usage, random weights %v", name, n, p.Model.RandomWeights)
		}
		t.Logf("%s: %d records, each re-counted to its usage.completion_tokens", name, n)
	}
}

// The committed ollama rehearsal tells the seed's story in the seed's
// layout: its README's results table has the seed's columns, the serial
// server's p95 TTFT grows with the clients, the batching one's stays well
// below it, and batching's goodput leads at the top load.
func TestCommittedOllamaTableIsTheSeeds(t *testing.T) {
	dir := "../../rehearsals/ollama-cpu"
	readme, err := os.ReadFile(filepath.Join(dir, bundle.ReadmeFile))
	if err != nil {
		t.Fatal(err)
	}
	header := "| Clients | serial goodput, median [min–max] tok/s | batching goodput, median [min–max] tok/s | Speed-up | serial p95 TTFT | batching p95 TTFT | serial failures | batching failures |"
	if !strings.Contains(string(readme), header) {
		t.Errorf("%s/README.md has no results table in the seed's layout:\n%s", dir, header)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	closed := map[string][]contract.Aggregate{}
	for _, a := range res.Aggregates {
		if contract.IsClosed(a.Mode) {
			closed[a.Server] = append(closed[a.Server], a)
		}
	}
	serial, batching := closed["serial"], closed["batching"]
	if len(serial) != 4 || len(batching) != 4 {
		t.Fatalf("closed-loop aggregates: serial %d, batching %d; want 4 each (1, 2, 4, 8 clients)", len(serial), len(batching))
	}
	for i := 1; i < len(serial); i++ {
		if *serial[i].TTFT.P95 <= *serial[i-1].TTFT.P95 {
			t.Errorf("serial p95 TTFT does not grow from %d to %d clients: %.3f s, %.3f s", serial[i-1].Concurrency, serial[i].Concurrency, *serial[i-1].TTFT.P95, *serial[i].TTFT.P95)
		}
	}
	top := len(serial) - 1
	if s, b := serial[top], batching[top]; *b.TTFT.P95 >= *s.TTFT.P95/2 || *b.Goodput.Median <= *s.Goodput.Median {
		t.Errorf("at %d clients: p95 TTFT serial %.3f s, batching %.3f s; goodput serial %.1f, batching %.1f tok/s",
			s.Concurrency, *s.TTFT.P95, *b.TTFT.P95, *s.Goodput.Median, *b.Goodput.Median)
	}
}
