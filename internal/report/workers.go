package report

import (
	"bytes"
	"fmt"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// writeWorkers is the section of a bundle whose load came from several
// workers (SPEC §10): a segment's own worker, or a merged bundle's workers
// with their clock offsets and each wave's release spread across them,
// beside the offset uncertainty that bounds how well it is known.
func writeWorkers(b *bytes.Buffer, res *bundle.Results) {
	p := res.Provenance
	if p.Worker == nil && len(p.Workers) == 0 {
		return
	}
	b.WriteString("## Load-generator workers\n\n")
	if w := p.Worker; w != nil {
		fmt.Fprintf(b, "This bundle is segment %d/%d of a split plan (plan digest `%s`): worker %d's share of every wave, its records keeping the whole plan's client and request indices. ", w.Index, w.Count, w.PlanDigest, w.Index)
		if w.Coordinator != "" {
			fmt.Fprintf(b, "Its waves were released at the instants the coordinator %s gave; its clock was %s ms off the coordinator's (± %s ms). ", w.Coordinator, Number(w.ClockOffsetS*1000), Number(w.OffsetUncertaintyS*1000))
		}
		b.WriteString("`rehearse merge` joins the segments into the bundle of the whole plan.\n\n")
		return
	}
	fmt.Fprintf(b, "Merged from %d workers' segments of one plan (digest `%s`); each wave below holds every worker's records. ", len(p.Workers), p.Workers[0].PlanDigest)
	b.WriteString("A worker's clock offset is the coordinator's clock minus its own, from the time sample of least round trip; its uncertainty is half that round trip.\n\n")
	writeRow(b, []string{"worker", "host", "clock offset (ms)", "uncertainty (ms)", "coordinator"})
	writeRow(b, []string{"---:", "---", "---:", "---:", "---"})
	for _, w := range p.Workers {
		writeRow(b, []string{fmt.Sprint(w.Index), orDash(w.Host), Number(w.ClockOffsetS * 1000), Number(w.OffsetUncertaintyS * 1000), orDash(w.Coordinator)})
	}
	b.WriteString("\nEach wave's release across workers: the latest worker's release minus the earliest, on the coordinator's clock, beside the largest offset uncertainty of its workers (a spread below it is within what the clocks can tell).\n\n")
	writeRow(b, []string{"server", "kind", "load", "repeat", "records by worker", "release spread (ms)", "offset uncertainty (ms)"})
	writeRow(b, []string{"---", "---", "---", "---:", "---", "---:", "---:"})
	for _, w := range res.Waves {
		if w.WorkerReleaseSpreadS == nil {
			continue
		}
		counts := ""
		for i, x := range w.Workers {
			if i > 0 {
				counts += " · "
			}
			counts += fmt.Sprint(x.Records)
		}
		unc := "—"
		if w.OffsetUncertaintyS != nil {
			unc = Number(*w.OffsetUncertaintyS * 1000)
		}
		writeRow(b, []string{w.Server, w.Kind, contract.KeyOf(w).LoadLabel(), fmt.Sprint(w.Repeat), counts, Number(*w.WorkerReleaseSpreadS * 1000), unc})
	}
	b.WriteString("\n")
}
