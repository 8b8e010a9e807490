package bundle_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
)

// journalCut journals res as a rehearsal does (each wave at its release,
// its records, the wave again at its end) and stops, as a SIGKILL would,
// after the first cutAfter records of wave cutWave: its end is never
// journaled.
func journalCut(t *testing.T, res *bundle.Results, cutWave, cutAfter int) []byte {
	t.Helper()
	path := t.TempDir() + "/" + bundle.JournalFile
	j, err := bundle.CreateJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	j.WriteHeader(res)
	for _, w := range res.Waves {
		release := w
		release.WallS, release.ReleaseSpreadS, release.ClientCPUS = 0, 0, 0
		j.WriteWave(release)
		n := 0
		for _, r := range res.Records {
			if r.Wave != w.ID {
				continue
			}
			if w.ID == cutWave && n == cutAfter {
				j.Close()
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				return data
			}
			j.WriteRecord(r)
			n++
		}
		j.WriteWave(w)
	}
	t.Fatalf("wave %d has no record %d", cutWave, cutAfter)
	return nil
}

func TestJournalCutMidWaveMarksTheWaveStopped(t *testing.T) {
	res := bundletest.SeedLike()
	var cut contract.Wave
	for _, w := range res.Waves {
		if w.Server == "naive" && w.Concurrency == 8 && w.Repeat == 0 {
			cut = w
		}
	}
	got, err := bundle.DecodeJournal(bytes.NewReader(journalCut(t, res, cut.ID, 4)))
	if err != nil {
		t.Fatal(err)
	}
	const want = "cut: the journal ends before this wave's end (rehearse stopped or crashed); 4 of its 8 requests were journaled"
	for _, w := range got.Waves {
		switch {
		case w.ID == cut.ID && w.Stopped != want:
			t.Errorf("wave %d cut after 4 of 8 records: stopped %q, want %q", w.ID, w.Stopped, want)
		case w.ID != cut.ID && w.Stopped != "":
			t.Errorf("wave %d, journaled to its end: stopped %q", w.ID, w.Stopped)
		}
	}
	var warned bool
	for _, a := range got.Aggregates {
		if a.Server == "naive" && a.Concurrency == 8 {
			for _, w := range a.Warnings {
				warned = warned || w == "repeat 0 stopped early: "+want
			}
			if !warned {
				t.Errorf("naive at 8 clients: warnings %q lack the cut repeat", a.Warnings)
			}
		}
	}
	if joined := strings.Join(got.Notes, "\n"); !strings.Contains(joined, "wave 3 (naive, 8 clients, repeat 0)") || !strings.Contains(joined, "journal ends") {
		t.Errorf("notes do not say which wave the journal cut: %q", got.Notes)
	}
}

// A header journaled again (on every note) does not repeat the workload's
// prompts: they are written once, and the journal's rebuild keeps them.
func TestJournalWritesThePromptsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), bundle.JournalFile)
	j, err := bundle.CreateJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	h := &bundle.Results{Workload: bundle.Workload{Prompts: []string{"the first prompt", "the second prompt"}, PromptMaxTokens: []int{3, 4}}}
	for i := range 3 {
		h.Notes = append(h.Notes, fmt.Sprintf("note %d", i))
		if err := j.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("the second prompt")); n != 1 {
		t.Errorf("the prompts were written %d times in 3 headers, want once", n)
	}
	res, err := bundle.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Workload.Prompts, h.Workload.Prompts) || !slices.Equal(res.Workload.PromptMaxTokens, []int{3, 4}) || len(res.Notes) != 3 {
		t.Fatalf("rebuilt workload %+v, notes %q", res.Workload, res.Notes)
	}
}
