package bundle_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
)

func writeBundle(t *testing.T, res *bundle.Results) string {
	t.Helper()
	dir := t.TempDir()
	if err := bundle.WriteResults(dir, res); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "naive.log"), []byte("INFO started\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := bundle.WriteSumsKnown(dir, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRoundTripAndVerify(t *testing.T) {
	res := bundletest.SeedLike()
	dir := writeBundle(t, res)
	got, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Aggregates, res.Aggregates) {
		t.Error("aggregates changed in a write/read round trip")
	}
	if len(got.Records) != len(res.Records) {
		t.Errorf("records: %d, want %d", len(got.Records), len(res.Records))
	}
	if probs := bundletest.Verify(dir); len(probs) != 0 {
		t.Fatalf("a fresh bundle must verify, got %v", probs)
	}
}

func TestVerifyDetectsChangedBytes(t *testing.T) {
	dir := writeBundle(t, bundletest.SeedLike())
	log := filepath.Join(dir, "naive.log")
	if err := os.WriteFile(log, []byte("INFO started\nERROR hidden\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	probs := bundletest.Verify(dir)
	if len(probs) != 1 || probs[0].File != "naive.log" || !strings.Contains(probs[0].Msg, "SHA256SUMS says") {
		t.Fatalf("want one digest problem for naive.log, got %v", probs)
	}
}

func TestVerifyDetectsChangedContentWithRemadeDigests(t *testing.T) {
	res := bundletest.SeedLike()
	// Make the baseline look better than its records: change a stored
	// median and re-make every digest so only recomputation can tell.
	v := *res.Aggregates[1].Goodput.Median * 1.5
	res.Aggregates[1].Goodput.Median = &v
	dir := writeBundle(t, res)
	probs := bundletest.Verify(dir)
	if len(probs) != 1 {
		t.Fatalf("want exactly one problem, got %v", probs)
	}
	p := probs[0].String()
	for _, want := range []string{"results.json", "server naive, 8 clients", "goodput_tok_s.median", "recomputed"} {
		if !strings.Contains(p, want) {
			t.Errorf("problem %q does not name %q", p, want)
		}
	}
}

func TestVerifyDetectsChangedRecord(t *testing.T) {
	res := bundletest.SeedLike()
	res.Records[5].OutputTokens += 40 // a record changed after aggregation
	dir := writeBundle(t, res)
	probs := bundletest.Verify(dir)
	if len(probs) == 0 {
		t.Fatal("a changed record must make the stored aggregates disagree")
	}
}

func TestVerifyUnlistedAndMissingFiles(t *testing.T) {
	dir := writeBundle(t, bundletest.SeedLike())
	os.WriteFile(filepath.Join(dir, "extra.txt"), []byte("x"), 0o644)
	os.Remove(filepath.Join(dir, "naive.log"))
	var msgs []string
	for _, p := range bundletest.Verify(dir) {
		msgs = append(msgs, p.String())
	}
	joined := strings.Join(msgs, "\n")
	if !strings.Contains(joined, "extra.txt: not listed") || !strings.Contains(joined, "naive.log: listed in SHA256SUMS but missing") {
		t.Fatalf("got %q", joined)
	}
}

func TestReadResultsBadInput(t *testing.T) {
	good, err := bundletest.Encode(bundletest.SeedLike())
	if err != nil {
		t.Fatal(err)
	}
	missingField := func() []byte {
		var m map[string]any
		json.Unmarshal(good, &m)
		rec := m["records"].([]any)[3].(map[string]any)
		delete(rec, "end_s")
		b, _ := json.Marshal(m)
		return b
	}()
	tests := []struct {
		name  string
		data  []byte // nil: no results.json
		noDir bool
		want  string
	}{
		{name: "missing dir", noDir: true, want: "no such bundle directory"},
		{name: "missing results.json", want: "results.json: missing"},
		{name: "truncated", data: good[:len(good)/2], want: "truncated JSON"},
		{name: "empty", data: []byte{}, want: "truncated JSON"},
		{name: "unknown schema", data: bytes.Replace(good, []byte(bundle.Schema), []byte("rehearse/results/v9"), 1), want: `unknown schema "rehearse/results/v9"`},
		{name: "no schema", data: []byte(`{"records": []}`), want: `no "schema" field`},
		{name: "missing field", data: missingField, want: "records[3]: missing field end_s"},
		{name: "wrong type", data: bytes.Replace(good, []byte(`"concurrency": 1,`), []byte(`"concurrency": "one",`), 1), want: "concurrency"},
		{name: "not json", data: []byte("hello"), want: "invalid JSON at line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.noDir {
				dir = filepath.Join(dir, "nope")
			} else if tt.data != nil {
				os.WriteFile(filepath.Join(dir, bundle.ResultsFile), tt.data, 0o644)
			}
			_, err := bundle.ReadResults(dir)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q: want one line containing %q", err, tt.want)
			}
		})
	}
}

func TestJournalRebuildsResults(t *testing.T) {
	res := bundletest.SeedLike()
	path := filepath.Join(t.TempDir(), bundle.JournalFile)
	j, err := bundle.CreateJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.WriteHeader(res); err != nil {
		t.Fatal(err)
	}
	for _, w := range res.Waves {
		open := w
		open.WallS = 0
		j.WriteWave(open) // at release
	}
	for _, r := range res.Records {
		if err := j.WriteRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range res.Waves {
		j.WriteWave(w) // at the end
	}
	j.WriteMechanismCheck(*res.MechanismCheck)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := bundle.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Aggregates, res.Aggregates) || len(got.Records) != len(res.Records) || len(got.Waves) != len(res.Waves) {
		t.Fatal("results rebuilt from the journal differ from the original")
	}
	if got.MechanismCheck == nil || *got.MechanismCheck.Max != *res.MechanismCheck.Max {
		t.Fatal("mechanism check lost")
	}
}

func TestJournalTornLastLine(t *testing.T) {
	res := bundletest.SeedLike()
	var buf bytes.Buffer
	path := filepath.Join(t.TempDir(), bundle.JournalFile)
	j, _ := bundle.CreateJournal(path)
	j.WriteHeader(res)
	j.WriteWave(res.Waves[0])
	j.WriteRecord(res.Records[0])
	j.WriteRecord(res.Records[1])
	j.Close()
	data, _ := os.ReadFile(path)
	buf.Write(data[:len(data)-30]) // the tool died in the middle of the last write
	got, err := bundle.DecodeJournal(&buf)
	if err != nil {
		t.Fatalf("a torn last line must not lose the rest: %v", err)
	}
	if len(got.Records) != 1 {
		t.Errorf("records = %d, want 1", len(got.Records))
	}
	if len(got.Notes) == 0 || !strings.Contains(got.Notes[len(got.Notes)-1], "torn") {
		t.Errorf("the dropped line must be noted: %q", got.Notes)
	}
	// A bad line in the middle is an error naming the line.
	bad := strings.Replace(string(data), `{"record"`, `{"record" x`, 1)
	if _, err := bundle.DecodeJournal(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("want an error naming line 3, got %v", err)
	}
}

func FuzzDecodeJournal(f *testing.F) {
	res := bundletest.SeedLike()
	var buf bytes.Buffer
	path := filepath.Join(f.TempDir(), bundle.JournalFile)
	j, _ := bundle.CreateJournal(path)
	j.WriteHeader(res)
	j.WriteWave(res.Waves[0])
	j.WriteRecord(res.Records[0])
	j.Close()
	data, _ := os.ReadFile(path)
	buf.Write(data)
	f.Add(buf.Bytes())
	f.Add([]byte(`{"header":{}}` + "\n" + `{"record":{"server":"a","kind":"recorded","wave":1}}`))
	f.Add([]byte("{}\n{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := bundle.DecodeJournal(bytes.NewReader(data))
		if err == nil && r == nil {
			t.Fatal("nil results without error")
		}
	})
}

func FuzzDecodeResults(f *testing.F) {
	good, _ := bundletest.Encode(bundletest.SeedLike())
	f.Add(good)
	f.Add([]byte(`{"schema":"rehearse/results/v1","records":[{}]}`))
	f.Add([]byte(`{"schema":"rehearse/results/v1","waves":[{"id":1,"server":"a","concurrency":1,"repeat":0,"kind":"recorded","started_at":"","wall_s":1,"cold":false}],"records":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := bundletest.Decode(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		// Whatever decodes must be verifiable without panicking.
		_ = bundle.VerifyResults(r)
	})
}

func TestVerifyDetectsDuplicateAggregate(t *testing.T) {
	res := bundletest.SeedLike()
	// A bogus copy of aggregates[1] placed before the real one must not
	// verify: a later duplicate once silently replaced the earlier one.
	bogus := res.Aggregates[1]
	v := 9999.0
	bogus.Goodput.Median = &v
	res.Aggregates = append([]contract.Aggregate{bogus}, res.Aggregates...)
	dir := writeBundle(t, res)
	var msgs []string
	for _, p := range bundletest.Verify(dir) {
		msgs = append(msgs, p.String())
	}
	joined := strings.Join(msgs, "\n")
	for _, want := range []string{"aggregates[2]: duplicate of aggregates[0]", "goodput_tok_s.median: stored 9999"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems %q do not contain %q", joined, want)
		}
	}
}

func TestVerifyRecomputesStoredWaveAndWorkloadFields(t *testing.T) {
	res := bundletest.SeedLike()
	res.Waves[4].ReleaseSpreadS += 0.5
	res.Workload.PercentileMethod = "nearest rank"
	dir := writeBundle(t, res)
	var msgs []string
	for _, p := range bundletest.Verify(dir) {
		msgs = append(msgs, p.String())
	}
	joined := strings.Join(msgs, "\n")
	if len(msgs) != 2 {
		t.Errorf("want 2 problems, got %q", joined)
	}
	for _, want := range []string{"waves[4].release_spread_s: stored", "workload.percentile_method: \"nearest rank\" is not"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems %q do not contain %q", joined, want)
		}
	}
}

func TestReadResultsRejectsRecordDisagreeingWithWave(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*contract.Record)
		want string
	}{
		{"concurrency", func(r *contract.Record) { r.Concurrency = 64 }, "records[3].concurrency: 64, its wave 3 says 8"},
		{"repeat", func(r *contract.Record) { r.Repeat = 2 }, "records[3].repeat: 2, its wave 3 says 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := bundletest.SeedLike()
			tc.edit(&res.Records[3])
			dir := writeBundle(t, res)
			_, err := bundle.ReadResults(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestEncodeNamesNonFiniteMechanismValue(t *testing.T) {
	res := bundletest.SeedLike()
	res.MechanismCheck.Series[2][1] = math.NaN()
	_, err := bundletest.Encode(res)
	if err == nil || !strings.Contains(err.Error(), "mechanism_check.series[2]") {
		t.Fatalf("got %v, want an error naming mechanism_check.series[2]", err)
	}
}

func TestVerifyNamesOpenLoopLoadByRate(t *testing.T) {
	res := bundletest.SeedLike()
	id := len(res.Waves)
	res.Waves = append(res.Waves, contract.Wave{ID: id, Server: "batching", Kind: contract.KindRecorded, Mode: contract.ModeOpen, RequestRateRPS: 2.5,
		StartedAt: "2026-11-30T14:00:00Z"})
	for i := 0; i < 3; i++ {
		start := 0.4 * float64(i)
		first := start + 0.3
		res.Records = append(res.Records, contract.Record{Kind: contract.KindRecorded, Server: "batching", Wave: id, Client: i,
			IntendedStartS: start, StartS: start, FirstContentS: &first, ChunkTimesS: []float64{first, 2}, EndS: 2,
			Text: " the the", OutputTokens: 2, OK: true, FinishReason: "stop"})
	}
	bundle.FixWaveTimes(res)
	res.Recompute()
	last := &res.Aggregates[len(res.Aggregates)-1]
	v := *last.Goodput.Median * 2
	last.Goodput.Median = &v
	dir := writeBundle(t, res)
	probs := bundletest.Verify(dir)
	if len(probs) != 1 {
		t.Fatalf("want one problem, got %v", probs)
	}
	if p, want := probs[0].String(), "results.json: server batching, 2.5 req/s: goodput_tok_s.median: stored"; !strings.HasPrefix(p, want) {
		t.Errorf("problem %q does not start %q", p, want)
	}
}

func TestWriteSumsKnownHashesOnlyTheOthers(t *testing.T) {
	dir := writeBundle(t, bundletest.SeedLike())
	fake := strings.Repeat("f", 64)
	if err := bundle.WriteSumsKnown(dir, []bundle.Digest{{File: "naive.log", SHA256: fake}}); err != nil {
		t.Fatal(err)
	}
	got, err := bundle.ReadSums(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := bundletest.HashFile(filepath.Join(dir, bundle.ResultsFile))
	if len(got) != 2 || got[0] != (bundle.Digest{File: "naive.log", SHA256: fake}) || got[1] != (bundle.Digest{File: bundle.ResultsFile, SHA256: want}) {
		t.Errorf("SHA256SUMS %v: want naive.log's given digest reused and results.json hashed", got)
	}
}

func TestMergeRefusesDifferentOpenLoopSchedules(t *testing.T) {
	open := func(rates ...float64) *bundle.Results {
		r := bundletest.SeedLike()
		r.Workload.Open = &bundle.OpenLoop{RequestRatesRPS: rates, Arrival: "poisson", Seed: 1, NumRequests: 10}
		return r
	}
	for _, tc := range []struct {
		name string
		b    *bundle.Results
		want string
	}{
		{"rates", open(4), "partB: workload differs from partA's: open_loop.request_rates_rps [4] vs [1 2]"},
		{"absent", bundletest.SeedLike(), "partB: workload differs from partA's: open_loop absent vs present"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bundletest.Merge(t, []*bundle.Results{open(1, 2), tc.b}, []string{"partA", "partB"}, bundle.MergeOptions{MechanismServer: "batching"})
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := bundletest.Merge(t, []*bundle.Results{open(1, 2), open(1, 2)}, []string{"partA", "partB"}, bundle.MergeOptions{MechanismServer: "batching"}); err != nil && strings.Contains(err.Error(), "open_loop") {
		t.Errorf("equal schedules refused: %v", err)
	}
}

func TestMergeRefusesTheSameRehearsalTwice(t *testing.T) {
	res := bundletest.SeedLike()
	copyOf := *res
	_, err := bundletest.Merge(t, []*bundle.Results{res, &copyOf}, []string{"a", "a-copy"}, bundle.MergeOptions{MechanismServer: "batching"})
	if want := fmt.Sprintf("a-copy holds the same rehearsal as a (the same %d records): merged, it would count twice", len(res.Records)); err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	// Parts without records are told apart by start, host and waves.
	empty := func(started string) *bundle.Results {
		r := *res
		r.Records, r.MechanismCheck, r.Workload.MechanismCheck = nil, nil, nil
		r.Provenance.StartedAt = started
		return &r
	}
	if _, err := bundle.MergeWith([]*bundle.Results{empty("2026-11-30T12:00:00Z"), empty("2026-11-30T12:00:00Z")}, []string{"a", "b"}, bundle.MergeOptions{}); err == nil || !strings.Contains(err.Error(), "b holds the same rehearsal as a (no records, the same start 2026-11-30T12:00:00Z on testhost") {
		t.Errorf("two empty parts of one start: %v", err)
	}
	if _, err := bundle.MergeWith([]*bundle.Results{empty("2026-11-30T12:00:00Z"), empty("2026-11-30T13:00:00Z")}, []string{"a", "b"}, bundle.MergeOptions{}); err != nil && strings.Contains(err.Error(), "same rehearsal") {
		t.Errorf("two empty parts of different starts refused: %v", err)
	}
}

// TestMergeSaysWhenPartsCameFromDifferentBuilds: the merged bundle keeps the
// first part's tool record, and a note names any other part's build.
func TestMergeSaysWhenPartsCameFromDifferentBuilds(t *testing.T) {
	part := func(started string, tool bundle.Tool) *bundle.Results {
		r := bundletest.SeedLike()
		r.Records, r.MechanismCheck, r.Workload.MechanismCheck = nil, nil, nil
		r.Provenance.StartedAt, r.Provenance.Tool = started, tool
		return r
	}
	a := bundle.Tool{Name: "rehearse", Version: "v0.1.0", Commit: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.8"}
	b := bundle.Tool{Name: "rehearse", Version: "(devel)", GoVersion: "go1.26.8", Note: "commit unknown: no VCS stamp"}
	out, err := bundle.MergeWith([]*bundle.Results{part("2026-11-30T12:00:00Z", a), part("2026-11-30T13:00:00Z", b), part("2026-11-30T14:00:00Z", a)}, []string{"a", "b", "c"}, bundle.MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Provenance.Tool != a {
		t.Errorf("tool %+v, want the first part's", out.Provenance.Tool)
	}
	want := "[b] This part was written by rehearse (devel) (commit unknown); the bundle's tool record is a's: rehearse v0.1.0 (commit 0123456789abcdef0123456789abcdef01234567)."
	var notes []string
	for _, n := range out.Notes {
		if strings.Contains(n, "written by") {
			notes = append(notes, n)
		}
	}
	if len(notes) != 1 || notes[0] != want {
		t.Errorf("notes about the builds %q, want [%q]", notes, want)
	}
}

// A sustained wave (its warm-up a wave of its own) verifies, and a changed
// goodput of it is found: verify recomputes it over the measured window.
func TestVerifyRecomputesASustainedWave(t *testing.T) {
	res := bundletest.SeedLike()
	warm, id := len(res.Waves), len(res.Waves)+1
	res.Waves = append(res.Waves,
		contract.Wave{ID: warm, Server: "batching", Concurrency: 2, Repeat: 1, Kind: contract.KindWarmup, Mode: contract.ModeSustained, StartedAt: "2026-11-30T14:00:00Z"},
		contract.Wave{ID: id, Server: "batching", Concurrency: 2, Repeat: 1, Kind: contract.KindRecorded, Mode: contract.ModeSustained, StartedAt: "2026-11-30T14:00:01Z"})
	for i := range 6 {
		w, kind := id, contract.KindRecorded
		if i < 2 {
			w, kind = warm, contract.KindWarmup
		}
		start := 0.5 * float64(i/2)
		first, end := start+0.1, start+0.5
		res.Records = append(res.Records, contract.Record{Kind: kind, Server: "batching", Concurrency: 2, Repeat: 1, Wave: w, Client: i % 2,
			StartS: start, FirstContentS: &first, ChunkTimesS: []float64{first, end}, EndS: end,
			Text: " the the", OutputTokens: 2, OK: true, FinishReason: "stop"})
	}
	bundle.FixWaveTimes(res)
	res.Recompute()
	last := res.Aggregates[len(res.Aggregates)-1]
	if last.Mode != contract.ModeSustained || *last.Goodput.Median != 8/1.0 {
		t.Fatalf("last aggregate %s %v: want sustained, 8 tokens over the 1 s window", last.Mode, *last.Goodput.Median)
	}
	if probs := bundletest.Verify(writeBundle(t, res)); len(probs) != 0 {
		t.Fatalf("a sustained bundle must verify, got %v", probs)
	}
	v := *last.Goodput.Median * 2
	res.Aggregates[len(res.Aggregates)-1].Goodput.Median = &v
	probs := bundletest.Verify(writeBundle(t, res))
	if len(probs) != 1 || !strings.HasPrefix(probs[0].String(), "results.json: server batching, 2 clients, sustained: goodput_tok_s.median: stored") {
		t.Fatalf("want the goodput named, got %v", probs)
	}
}

// TestVerifyRecomputesTrafficLengths tampers with the stored input and
// output length statistics of an aggregate (digests remade): verify
// recomputes both from the records and names each field.
func TestVerifyRecomputesTrafficLengths(t *testing.T) {
	res := bundletest.WithInputTokens(bundletest.SeedLike())
	a := &res.Aggregates[2]
	if a.InputLength.N == 0 || a.OutputLength.Mean == nil {
		t.Fatalf("test data has no lengths: %+v %+v", a.InputLength, a.OutputLength)
	}
	p90 := *a.InputLength.P90 + 1
	mean := *a.OutputLength.Mean * 0.9
	a.InputLength.P90, a.OutputLength.Mean = &p90, &mean
	dir := writeBundle(t, res)
	var msgs []string
	for _, p := range bundletest.Verify(dir) {
		msgs = append(msgs, p.String())
	}
	joined := strings.Join(msgs, "\n")
	if len(msgs) != 2 {
		t.Errorf("want 2 problems, got %q", joined)
	}
	for _, want := range []string{"server naive, 32 clients: input_length_tok.p90: stored", "server naive, 32 clients: output_length_tok.mean: stored"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems %q do not contain %q", joined, want)
		}
	}
}
