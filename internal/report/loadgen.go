package report

import (
	"bytes"
	"fmt"
	"math"
	"slices"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// stallShare is the share of a wave's p95 TTFT from which a host stall
// could bend a figure; minStallS keeps a timer's ordinary lateness (well
// under a millisecond) from counting.
const (
	stallShare = 0.10
	minStallS  = 0.001
)

// writeLoadGenerator shows the load generator's own accounting per server,
// so a reader can tell a figure of the client from one of the server: the
// largest release spread of its closed-loop waves and its CPU use.
func writeLoadGenerator(b *bytes.Buffer, res *bundle.Results) {
	accs := loadAccounts(res)
	if len(accs) == 0 {
		return
	}
	// A bundle written before waves measured the host has no such columns.
	host := false
	for _, a := range accs {
		host = host || a.stalls != nil || a.slip != nil
	}
	b.WriteString("## Load generator\n\n")
	b.WriteString("What the client itself did, from the recorded waves: the largest release spread of a closed-loop wave (last send minus first), and rehearse's CPU time over the waves' wall time.")
	if host {
		b.WriteString(" Client stalls are the client's own: how late a 5 ms timer woke during each wave (the largest, and the wake-ups over 20 ms late); simulator lateness is how late a simulated server's engine steps ran against their schedule, read from its `/metrics` around each wave. A large spread, a busy or stalled client or a late simulator would shape the figures above.\n\n")
	} else {
		b.WriteString(" A large spread or a busy client would shape the figures above.\n\n")
	}
	head, align := []string{"Server", "Recorded waves", "Largest release spread", "Client CPU", "Open-loop requests that waited / never sent"}, []string{"---", "---:", "---:", "---:", "---:"}
	if host {
		head, align = append(head, "Client stalls", "Simulator lateness"), append(align, "---:", "---:")
	}
	writeRow(b, head)
	writeRow(b, align)
	for _, a := range accs {
		writeRow(b, a.row(host))
	}
	b.WriteString("\n")
	if warns := hostWarnings(res); len(warns) > 0 {
		for _, w := range warns {
			b.WriteString("- ⚠ " + w + "\n")
		}
		b.WriteString("\n")
	}
	writeClientAdded(b, res)
}

// loadAccount is the load generator's accounting of one server, over its
// recorded waves.
type loadAccount struct {
	server         string
	waves          int
	spreadS        float64
	cpuS, wallS    float64
	haveCPU        bool
	notSent, waits int
	stalls         *contract.Stalls     // the largest stall, over-20-ms count summed
	slip           *contract.ServerSlip // summed, max of max
}

// loadAccounts are the accounts of the servers with a recorded wave, in
// the order of their first.
func loadAccounts(res *bundle.Results) []*loadAccount {
	var accs []*loadAccount
	by := map[string]*loadAccount{}
	for _, w := range res.Waves {
		if w.Kind != contract.KindRecorded {
			continue
		}
		a := by[w.Server]
		if a == nil {
			a = &loadAccount{server: w.Server}
			by[w.Server] = a
			accs = append(accs, a)
		}
		a.add(w)
	}
	return accs
}

// add counts recorded wave w in a.
func (a *loadAccount) add(w contract.Wave) {
	a.waves++
	a.spreadS = max(a.spreadS, w.ReleaseSpreadS)
	a.wallS += w.WallS
	if w.ClientCPUS > 0 {
		a.cpuS += w.ClientCPUS
		a.haveCPU = true
	}
	a.notSent += w.NotSent
	a.waits += w.Waited
	if st := w.ClientStalls; st != nil {
		if a.stalls == nil {
			a.stalls = &contract.Stalls{}
		}
		a.stalls.MaxS = max(a.stalls.MaxS, st.MaxS)
		a.stalls.Over += st.Over
		a.stalls.Ticks += st.Ticks
	}
	if sl := w.ServerSlip; sl != nil {
		if a.slip == nil {
			a.slip = &contract.ServerSlip{}
		}
		a.slip.Steps += sl.Steps
		a.slip.Late += sl.Late
		a.slip.SlipS += sl.SlipS
		a.slip.MaxS = max(a.slip.MaxS, sl.MaxS)
	}
}

// row is a's row of the load generator table; host adds the client
// stalls and simulator lateness.
func (a *loadAccount) row(host bool) []string {
	cpu := dash
	if a.haveCPU && a.wallS > 0 {
		cpu = fmt.Sprintf("%.2f s over %.1f s (%.0f%% of one core)", a.cpuS, a.wallS, 100*a.cpuS/a.wallS)
	}
	spread := dash
	if a.spreadS > 0 {
		spread = fmt.Sprintf("%.2f ms", 1000*a.spreadS)
	}
	row := []string{a.server, fmt.Sprint(a.waves), spread, cpu, fmt.Sprintf("%d / %d", a.waits, a.notSent)}
	if host {
		row = append(row, stallCell(a.stalls), slipCell(a.slip))
	}
	return row
}

// stallCell is the largest client stall of a server's waves and how many
// wake-ups came over 20 ms late.
func stallCell(st *contract.Stalls) string {
	if st == nil {
		return dash
	}
	return fmt.Sprintf("%.1f ms max, %d over 20 ms", 1000*st.MaxS, st.Over)
}

// slipCell is how late a simulated server's steps ran, over its waves.
func slipCell(sl *contract.ServerSlip) string {
	if sl == nil {
		return dash
	}
	cell := fmt.Sprintf("%d of %d steps over 20 ms late", sl.Late, sl.Steps)
	if sl.SlipS > 0 {
		cell += fmt.Sprintf(", %.1f ms of schedule lost", 1000*sl.SlipS)
	}
	return cell
}

// hostWarnings names each recorded wave whose client stalled, or whose
// simulated server fell behind its schedule, by as much as stallShare of
// the wave's p95 TTFT (or lost schedule outright).
func hostWarnings(res *bundle.Results) []string {
	ttfts := map[int][]float64{}
	for _, r := range res.Records {
		if v, ok := r.TTFT(); ok && r.OK {
			ttfts[r.Wave] = append(ttfts[r.Wave], v)
		}
	}
	var out []string
	for _, w := range res.Waves {
		if w.Kind != contract.KindRecorded {
			continue
		}
		xs := ttfts[w.ID]
		slices.Sort(xs)
		p95 := contract.Percentile(xs, 0.95)
		label := fmt.Sprintf("wave %d (%s at %s, repeat %d)", w.ID, w.Server, contract.KeyOf(w).LoadLabel(), w.Repeat)
		if st := w.ClientStalls; st != nil && p95 != nil && st.MaxS >= minStallS && st.MaxS >= stallShare**p95 {
			out = append(out, fmt.Sprintf("%s: the client stalled %.1f ms, %.0f%% of the wave's p95 TTFT (%.1f ms); a loaded host may have bent its figures.",
				label, 1000*st.MaxS, 100*st.MaxS / *p95, 1000**p95))
		}
		if sl := w.ServerSlip; sl != nil {
			switch {
			case sl.SlipS > 0:
				out = append(out, fmt.Sprintf("%s: the simulator lost %.1f ms of its schedule (steps more than 100 ms late); its figures are slower than its profile.", label, 1000*sl.SlipS))
			case sl.Late > 0 && p95 != nil && sl.MaxS >= stallShare**p95:
				out = append(out, fmt.Sprintf("%s: %d simulator steps ran over 20 ms late (up to %.0f ms), against a p95 TTFT of %.1f ms; a loaded host may have bent its figures.",
					label, sl.Late, 1000*sl.MaxS, 1000**p95))
			}
		}
	}
	return out
}

// writeClientAdded shows, for the loads whose server stamped its sends
// (rehearse sim --stamp-sends), the latency the client added between the
// server's send and its own stamp, from the records' client_added_s: the
// median of the requests' p50, the p99 of their p99, and the largest.
func writeClientAdded(b *bytes.Buffer, res *bundle.Results) {
	waves := map[int]contract.Wave{}
	for _, w := range res.Waves {
		waves[w.ID] = w
	}
	type acc struct {
		requests, events int
		p50s, p99s       []float64
		max              float64
	}
	var order []contract.Key
	by := map[contract.Key]*acc{}
	for i := range res.Records {
		r := &res.Records[i]
		w, ok := waves[r.Wave]
		if r.ClientAddedS == nil || r.Kind != contract.KindRecorded || !ok {
			continue
		}
		k := contract.KeyOf(w)
		a := by[k]
		if a == nil {
			a = &acc{max: r.ClientAddedS.Max}
			by[k] = a
			order = append(order, k)
		}
		a.requests++
		a.events += r.ClientAddedS.N
		a.p50s = append(a.p50s, r.ClientAddedS.P50)
		a.p99s = append(a.p99s, r.ClientAddedS.P99)
		a.max = max(a.max, r.ClientAddedS.Max)
	}
	if len(order) == 0 {
		return
	}
	b.WriteString("The server stamped each chunk with its send time, so the latency the client added is measured: receive stamp minus send stamp, on the same host's wall clock, for every stamped event of a recorded request (`client_added_s`). On Linux rehearse's own HTTP/1.1 path takes each receive stamp from the kernel (when the bytes reached the host), so this is loopback and the kernel on both sides, not rehearse's own queue; over net/http (https, a proxy) it stamps after each read and rehearse's queue is in it. Every time above includes it.\n\n")
	writeRow(b, []string{"Server", "Load", "Requests", "Events", "Median of requests' p50", "p99 of requests' p99", "Largest"})
	writeRow(b, []string{"---", "---", "---:", "---:", "---:", "---:", "---:"})
	us := func(v *float64) string {
		if v == nil {
			return dash
		}
		if math.Abs(*v) < 1e-3 {
			return fmt.Sprintf("%.0f µs", *v*1e6)
		}
		return fmt.Sprintf("%.2f ms", *v*1e3)
	}
	for _, k := range order {
		a := by[k]
		slices.Sort(a.p99s)
		writeRow(b, []string{k.Server, k.LoadLabel(), fmt.Sprint(a.requests), fmt.Sprint(a.events),
			us(contract.Median(a.p50s)), us(contract.Percentile(a.p99s, 0.99)), us(&a.max)})
	}
	b.WriteString("\n")
}
