package compare

import (
	"fmt"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/report"
	"github.com/rehearse/rehearse/internal/search"
)

// CapacitySide is one bundle's capacity answer for a server.
type CapacitySide struct {
	search.Capacity
	// Value is the capacity as a number of clients: max_pass, 0 when one
	// client already fails the objectives, nil when the search gave no
	// answer (the server failed, or it was interrupted, before a pass).
	Value *float64
	// AtLeast says Value is a lower bound: every load passed up to the
	// search's maximum concurrency.
	AtLeast bool
}

func capacitySide(c search.Capacity) CapacitySide {
	s := CapacitySide{Capacity: c}
	switch {
	case c.MaxPass != nil:
		v := float64(*c.MaxPass)
		s.Value = &v
		s.AtLeast = c.StopReason == search.StopMaxConcurrency
	case c.StopReason == search.StopUnmetAtMinimum:
		v := 0.0
		s.Value = &v
	}
	return s
}

// Text is the side's capacity as the comparison shows it: "42", "≥ 64",
// "0 (unmet at 1 client)", "— (server_failed)".
func (s CapacitySide) Text() string {
	switch {
	case s.Value == nil:
		return dash + " (" + s.StopReason + ")"
	case s.StopReason == search.StopUnmetAtMinimum:
		return "0 (unmet at 1 client)"
	case s.AtLeast:
		return fmt.Sprintf("≥ %.0f", *s.Value)
	}
	return fmt.Sprintf("%.0f", *s.Value)
}

const dash = "—"

// CapacityRow is one server's capacity search in both bundles.
type CapacityRow struct {
	Server string
	A, B   CapacitySide
	// Ratio is B's capacity ÷ A's; nil where either has none or A's is 0.
	Ratio *float64
}

// capacityRows pairs the capacity searches of a and b by server, in a's
// order, and notes the servers searched in one bundle only and searches
// under different SLOs.
func capacityRows(a, b *bundle.Results) (rows []CapacityRow, onlyA, onlyB, notes []string) {
	inB := map[string]search.Capacity{}
	for _, c := range b.Capacity {
		inB[c.Server] = c
	}
	inA := map[string]bool{}
	for _, ca := range a.Capacity {
		inA[ca.Server] = true
		cb, ok := inB[ca.Server]
		if !ok {
			onlyA = append(onlyA, "capacity of "+ca.Server)
			continue
		}
		row := CapacityRow{Server: ca.Server, A: capacitySide(ca), B: capacitySide(cb)}
		row.Ratio = ratio(row.A.Value, row.B.Value)
		rows = append(rows, row)
		if oa, ob := capacitySLO(ca), capacitySLO(cb); oa != ob {
			notes = append(notes, fmt.Sprintf("the capacity of %s was searched under different SLOs: A %s, B %s", ca.Server, oa, ob))
		}
	}
	for _, cb := range b.Capacity {
		if !inA[cb.Server] {
			onlyB = append(onlyB, "capacity of "+cb.Server)
		}
	}
	return rows, onlyA, onlyB, notes
}

func capacitySLO(c search.Capacity) string {
	return fmt.Sprintf("%s at %v", c.Objectives.String(), c.AttainmentTarget)
}

// evaluateCapacity evaluates a capacity gate on every server searched in
// both bundles. A lower bound (a search that passed up to its maximum) is
// used only where it decides the gate: a '<' gate trips on a B that is at
// least a value only if that cannot be a real regression's artefact, and
// so on; otherwise the row is skipped with the reason.
func evaluateCapacity(g Gate, rows []CapacityRow) GateResult {
	res := GateResult{Gate: g}
	matched := 0
	for _, row := range rows {
		if g.Server != "" && row.Server != g.Server {
			continue
		}
		matched++
		where := "capacity of " + row.Server
		va, vb := row.A.Value, row.B.Value
		if va == nil || vb == nil {
			side := "A"
			if va != nil {
				side = "B"
			} else if vb == nil {
				side = "A and B"
			}
			res.Skipped = append(res.Skipped, fmt.Sprintf("%s: %s has no capacity answer (the search stopped: %s)", where, side, stopOf(row, side)))
			continue
		}
		change := *vb - *va
		if g.Relative {
			if *va == 0 {
				res.Skipped = append(res.Skipped, fmt.Sprintf("%s: A's capacity is 0 (unmet at 1 client), so a relative change means nothing", where))
				continue
			}
			change /= *va
		}
		trips := (g.Op == '<' && change < g.Threshold) || (g.Op == '>' && change > g.Threshold)
		// A lower bound on B raises B's true capacity, one on A raises A's:
		// the change could then be larger (B) or smaller (A) than computed.
		upUnknown, downUnknown := row.B.AtLeast, row.A.AtLeast
		if g.Op == '>' {
			upUnknown, downUnknown = downUnknown, upUnknown
		}
		if (trips && upUnknown) || (!trips && downUnknown) {
			res.Skipped = append(res.Skipped, fmt.Sprintf("%s: %s → %s (%s) does not decide the gate: a search that passed up to its maximum concurrency gives only a lower bound", where, row.A.Text(), row.B.Text(), capacityChange(g, change)))
			continue
		}
		res.Evaluated++
		if trips {
			res.Tripped = append(res.Tripped, fmt.Sprintf("%s: %s → %s (%s)", where, row.A.Text(), row.B.Text(), capacityChange(g, change)))
		}
	}
	if matched == 0 {
		if g.Server != "" {
			res.Skipped = append(res.Skipped, fmt.Sprintf("no capacity search of server %q is in both bundles", g.Server))
		} else {
			res.Skipped = append(res.Skipped, "no server's capacity was searched in both bundles")
		}
	}
	return res
}

func stopOf(row CapacityRow, side string) string {
	switch side {
	case "A":
		return row.A.StopReason
	case "B":
		return row.B.StopReason
	}
	return row.A.StopReason + " and " + row.B.StopReason
}

func capacityChange(g Gate, change float64) string {
	if g.Relative {
		return report.Change(&change)
	}
	return fmt.Sprintf("%+.0f clients", change)
}

// capacityTable is the capacity rows as cells: server, capacity A and B,
// B/A, achieved req/s and good tok/s at each answer, and each stop reason.
func capacityTable(rows []CapacityRow, md bool) [][]string {
	out := [][]string{{"server", "capacity A", "capacity B", "B/A", "req/s A", "req/s B", "good tok/s A", "good tok/s B", "stop A", "stop B"}}
	num := func(v *float64, format string) string {
		if v == nil {
			return dash
		}
		return fmt.Sprintf(format, *v)
	}
	for _, r := range rows {
		server := r.Server
		if md {
			server = "`" + strings.ReplaceAll(server, "|", `\|`) + "`"
		}
		out = append(out, []string{
			server, r.A.Text(), r.B.Text(), report.Ratio(r.Ratio),
			num(r.A.AchievedRPS, "%.2f"), num(r.B.AchievedRPS, "%.2f"),
			num(r.A.GoodputTokS, "%.1f"), num(r.B.GoodputTokS, "%.1f"),
			strings.ReplaceAll(r.A.StopReason, "_", " "), strings.ReplaceAll(r.B.StopReason, "_", " "),
		})
	}
	return out
}

// CapacityNote explains the capacity section in every output.
const CapacityNote = "Capacity is the largest number of clients of the sustained closed loop at which a probe passed the SLO (max_pass); ≥ marks a search that passed up to its maximum concurrency, 0 one that failed at 1 client."

func writeCapacity(b *strings.Builder, r Report, md bool) {
	if len(r.Capacity) == 0 {
		return
	}
	t := capacityTable(r.Capacity, md)
	if md {
		b.WriteString("\n### Capacity under the SLO\n\n")
		b.WriteString("| Server | Capacity A | Capacity B | B/A | Req/s A | Req/s B | Good tok/s A | Good tok/s B | Stop A | Stop B |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
		for _, row := range t[1:] {
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		}
	} else {
		b.WriteString("\nCapacity under the SLO:\n")
		writeAlignedLeft(b, t, 1)
	}
	fmt.Fprintf(b, "\n%s\n", CapacityNote)
}
