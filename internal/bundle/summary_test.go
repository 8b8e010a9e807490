package bundle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
)

// ReadReport's streamed read of a bundle is the held read's: the same
// aggregates and cost (as Recompute computes them from the records held),
// the same waves and everything else, each record lean, the same count of
// stored figures that disagree (VerifyResults), results.json's digest as
// Hash gives it; or, where ReadResults refuses the bundle, its error. On
// every corruption of TestReliabilityBadRecords and bundles with an SLO
// or replicas, honest and tampered.
func TestReadReportIsReadHeld(t *testing.T) {
	withSLO := func(t *testing.T, r *bundle.Results) {
		o, err := contract.ParseObjectives("ttft<=500ms,tpot<=50ms,itl<=80ms")
		if err != nil {
			t.Fatal(err)
		}
		r.SLO = contract.NewSLO(o, 0.9)
	}
	rows := append([]reliabilityRow{{name: "uncorrupted"},
		{name: "uncorrupted, its journal", journal: func(*testing.T, *bundle.Results) {}},
		{name: "with an SLO", edit: withSLO},
		{name: "with an SLO, a good count raised", keepAggregates: true, edit: func(t *testing.T, r *bundle.Results) {
			withSLO(t, r)
			r.Recompute()
			r.Aggregates[0].SLO.Good++
		}},
		{name: "with replicas", edit: withReplicas},
		{name: "with replicas, a replica's count raised", keepAggregates: true, edit: func(t *testing.T, r *bundle.Results) {
			withReplicas(t, r)
			r.Recompute()
			for i := range r.Aggregates {
				if r.Aggregates[i].ReplicaRequests != nil {
					r.Aggregates[i].ReplicaRequests[1]++
					return
				}
			}
		}},
		{name: "a wave's wall_s and an aggregate changed", keepAggregates: true, edit: func(t *testing.T, r *bundle.Results) {
			r.Recompute()
			r.Waves[1].WallS += 2
			r.Aggregates[0].OutputTokens++
		}},
	}, reliabilityRows...)
	ctx := context.Background()
	streamed, disagreeing := 0, 0
	for _, row := range rows {
		dir := writeRow(t, row.edit, row.journal, row.keepAggregates)
		held, _, herr := bundle.ReadPart(ctx, dir)
		in, err := bundle.ReadReport(ctx, dir)
		if herr != nil {
			if err == nil || err.Error() != herr.Error() {
				t.Errorf("%s: ReadReport: %v; held: %v", row.name, err, herr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", row.name, err)
		}
		if !in.Lean {
			t.Errorf("%s: not streamed", row.name)
			continue
		}
		streamed++
		want := len(bundle.VerifyResults(held))
		if in.Disagree != want {
			t.Errorf("%s: %d stored figures disagree, VerifyResults finds %d", row.name, in.Disagree, want)
		}
		if want > 0 {
			disagreeing++
		}
		sum, err := bundletest.HashFile(filepath.Join(dir, bundle.ResultsFile))
		if err != nil || len(in.Known) == 0 || in.Known[0] != (bundle.Digest{File: bundle.ResultsFile, SHA256: sum}) {
			t.Errorf("%s: known digests %v, results.json's is %s (%v)", row.name, in.Known, sum, err)
		}
		if sum, err := bundletest.HashFile(filepath.Join(dir, bundle.JournalFile)); err == nil {
			if len(in.Known) != 2 || in.Known[1] != (bundle.Digest{File: bundle.JournalFile, SHA256: sum}) {
				t.Errorf("%s: known digests %v, the journal's is %s", row.name, in.Known, sum)
			}
		} else if len(in.Known) != 1 {
			t.Errorf("%s: known digests %v without a journal", row.name, in.Known)
		}
		held.Recompute()
		got := in.Results
		if len(got.Records) != len(held.Records) {
			t.Fatalf("%s: %d records, held %d", row.name, len(got.Records), len(held.Records))
		}
		for i := range held.Records {
			if !reflect.DeepEqual(got.Records[i], bundle.LeanRecord(held.Records[i])) {
				t.Fatalf("%s: records[%d] is not the held record made lean:\n%+v\n%+v", row.name, i, got.Records[i], bundle.LeanRecord(held.Records[i]))
			}
		}
		if !got.LeanRecords() || got.HasGeneratedText() != held.HasGeneratedText() {
			t.Errorf("%s: lean %v, generated text %v (held %v)", row.name, got.LeanRecords(), got.HasGeneratedText(), held.HasGeneratedText())
		}
		a, b := *got, *held
		a.Records, b.Records = nil, nil
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			t.Errorf("%s: the streamed results (records aside) differ from the held ones recomputed:\n%s\n%s", row.name, ja, jb)
		}
		if err := bundle.WriteResults(t.TempDir(), got); err == nil {
			t.Errorf("%s: lean results were written as results.json", row.name)
		}
	}
	t.Logf("%d of %d rows streamed, %d of them with disagreeing figures", streamed, len(rows), disagreeing)
	if streamed < 10 || disagreeing < 4 {
		t.Errorf("%d rows streamed, %d of them with disagreeing figures", streamed, disagreeing)
	}
}
