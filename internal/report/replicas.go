package report

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// Servers of several replicas or GPUs (SPEC §10) in the report: each
// replica's address, GPUs and log under the server's launch, goodput per
// GPU as a column of the results table, the requests each replica served,
// and the per-replica and per-engine maxima of the mechanism check.

// replicaLogRE matches a replica's log, <server>.replica-<i>.log.
var replicaLogRE = regexp.MustCompile(`^(.+)\.replica-(\d+)\.log$`)

// multi reports whether the bundle has a server of several replicas or one
// whose GPUs the rehearsal file gave: only then does the report speak of
// replicas and GPUs.
func multi(res *bundle.Results) bool {
	for _, s := range res.Servers {
		if len(s.Replicas) > 0 || len(s.GPUs) > 0 || s.Router != nil {
			return true
		}
	}
	return false
}

// gpuServers are the servers with a known GPU count, in order.
func gpuServers(res *bundle.Results) map[string]int {
	out := map[string]int{}
	for _, s := range res.Servers {
		if n := s.GPUCount(); n > 0 {
			out[s.Name] = n
		}
	}
	return out
}

// writeServerReplicas adds a server's replicas and router to its entry in
// "Servers and launch".
func writeServerReplicas(b *bytes.Buffer, s bundle.Server) {
	if n := s.GPUCount(); n > 0 {
		fmt.Fprintf(b, " GPUs: %d (%s).", n, gpuSets(s.GPUs))
	}
	for _, rp := range s.Replicas {
		fmt.Fprintf(b, "\n  - replica %d at %s", rp.Index, rp.BaseURL)
		if len(rp.GPUs) > 0 {
			fmt.Fprintf(b, ", GPUs %s (CUDA_VISIBLE_DEVICES)", Ints(rp.GPUs))
		}
		if rp.Log != "" {
			fmt.Fprintf(b, ". Log: [`%s`](%s)", rp.Log, rp.Log)
		}
		if rp.Exit != "" {
			fmt.Fprintf(b, ". Exit: %s", rp.Exit)
		}
		b.WriteString(".")
	}
	if rt := s.Router; rt != nil {
		fmt.Fprintf(b, "\n  - router at %s", rt.BaseURL)
		if len(rt.LaunchArgv) > 0 {
			fmt.Fprintf(b, ", launched as `%s`", Argv(rt.LaunchArgv))
		}
		if rt.Log != "" {
			fmt.Fprintf(b, ". Log: [`%s`](%s)", rt.Log, rt.Log)
		}
		if rt.Exit != "" {
			fmt.Fprintf(b, ". Exit: %s", rt.Exit)
		}
		b.WriteString("; it chose each request's replica.")
	}
	if s.Balance != "" {
		fmt.Fprintf(b, "\n  Requests were balanced by the client, %s, each record naming its replica.", s.Balance)
	}
}

func gpuSets(sets [][]int) string {
	parts := make([]string, len(sets))
	for i, s := range sets {
		parts[i] = "[" + Ints(s) + "]"
	}
	return strings.Join(parts, ", ")
}

// writeReplicas is the section on replicas and GPUs: requests per
// replica and why goodput per GPU is absent where it is.
func writeReplicas(b *bytes.Buffer, res *bundle.Results) {
	if !multi(res) {
		return
	}
	b.WriteString("## Replicas and GPUs\n\n")
	gpus := gpuServers(res)
	var unknown []string
	for _, s := range res.Servers {
		if gpus[s.Name] == 0 {
			unknown = append(unknown, "`"+s.Name+"`")
		}
	}
	if len(gpus) > 0 {
		b.WriteString("Goodput per GPU is each repeat's goodput ÷ the server's distinct GPUs (its `gpus:` sets), median [min–max]; the figure of tokens/s per user against tokens/s per GPU plots it against 1 ÷ median TPOT.\n\n")
	}
	if len(unknown) > 0 {
		fmt.Fprintf(b, "Goodput per GPU is left out for %s: the rehearsal file does not give its GPUs (`gpus:`), so its GPU count is not known.\n\n", strings.Join(unknown, ", "))
	}
	var rows [][]string
	width := 0
	for _, a := range res.Aggregates {
		if len(a.ReplicaRequests) == 0 {
			continue
		}
		row := []string{"`" + a.Server + "`", a.LoadLabel()}
		total := 0
		for _, n := range a.ReplicaRequests {
			total += n
		}
		for _, n := range a.ReplicaRequests {
			row = append(row, fmt.Sprintf("%d (%s)", n, Percent(n, total)))
		}
		width = max(width, len(a.ReplicaRequests))
		rows = append(rows, row)
	}
	if len(rows) > 0 {
		b.WriteString("Recorded requests per replica (client balancing; the record's `replica` names it):\n\n")
		head := []string{"Server", "Load"}
		align := []string{"---", "---"}
		for j := range width {
			head = append(head, fmt.Sprintf("replica %d", j))
			align = append(align, "---:")
		}
		writeRow(b, head)
		writeRow(b, align)
		for _, r := range rows {
			for len(r) < len(head) {
				r = append(r, dash)
			}
			writeRow(b, r)
		}
		b.WriteString("\n")
	}
}

// goodputPerGPU formats a per-GPU goodput as median [min–max] tok/s/GPU.
func goodputPerGPU(a contract.Aggregate) string {
	if a.GoodputPerGPU == nil {
		return dash
	}
	return Goodput(*a.GoodputPerGPU)
}

// mechanismReplicas names each replica's and label set's maximum.
func mechanismReplicas(b *bytes.Buffer, m *bundle.MechanismCheck) {
	var parts []string
	for _, ls := range m.LabelSets {
		parts = append(parts, fmt.Sprintf("`{%s}` %s", ls.Labels, maxOr(ls.Max)))
	}
	for _, rs := range m.Replicas {
		p := fmt.Sprintf("replica %d %s", rs.Replica, maxOr(rs.Max))
		var sets []string
		for _, ls := range rs.LabelSets {
			sets = append(sets, fmt.Sprintf("`{%s}` %s", ls.Labels, maxOr(ls.Max)))
		}
		if len(sets) > 0 {
			p += " (" + strings.Join(sets, ", ") + ")"
		}
		if rs.Errors > 0 {
			p += fmt.Sprintf(", %d failed scrapes", rs.Errors)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return
	}
	b.WriteString("Maximum per replica and label set (the series of each is in results.json; the maximum above is of their sum): ")
	b.WriteString(strings.Join(parts, "; "))
	b.WriteString(".\n\n")
}

func maxOr(v *float64) string {
	if v == nil {
		return dash
	}
	return Number(*v)
}
