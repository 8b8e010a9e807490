package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
)

// bench against rehearse sim --stamp-sends: every record carries the
// client-added latency of its stamped events (each data event but [DONE]),
// the README's load-generator section shows it, and verify accepts it;
// without the flag no record carries one.
func TestBenchClientAddedFromSendStamps(t *testing.T) {
	for _, stamp := range []bool{true, false} {
		args := []string{"--engine", "batching", "--time-scale", "20", "--seed", "5"}
		if stamp {
			args = append(args, "--stamp-sends")
		}
		url, _, _ := startSim(t, args...)
		dir := filepath.Join(t.TempDir(), "b")
		code, out, errs := runMain(context.Background(), "bench", "--base-url", url,
			"--concurrency", "4", "--repeats", "1", "--max-tokens", "16", "-o", dir)
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errs)
		}
		res, err := bundle.ReadResults(dir)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res.Records {
			a := r.ClientAddedS
			switch {
			case !stamp && a != nil:
				t.Fatalf("records[%d]: client_added_s %+v from a server that sent no stamps", i, *a)
			case stamp && a == nil:
				t.Fatalf("records[%d] (%s, ok %v): no client_added_s from a stamping server", i, r.Kind, r.OK)
			case stamp && r.OK && a.N < len(r.ChunkTimesS)+2:
				// The role chunk, each content chunk, the finish chunk.
				t.Fatalf("records[%d]: %d stamped events for %d content chunks", i, a.N, len(r.ChunkTimesS))
			case stamp && !(a.P50 <= a.P99 && a.P99 <= a.Max):
				t.Fatalf("records[%d]: client_added_s %+v out of order", i, *a)
			}
		}
		readme, _ := os.ReadFile(filepath.Join(dir, bundle.ReadmeFile))
		if got := strings.Contains(string(readme), "p99 of requests' p99"); got != stamp {
			t.Errorf("stamp %v: README shows the client-added table: %v", stamp, got)
		}
		if code, out, errs := runMain(context.Background(), "verify", dir); code != 0 {
			t.Fatalf("verify: exit %d\n%s%s", code, out, errs)
		}
	}
}
