package bundle

import (
	"fmt"
	"sort"

	"github.com/rehearse/rehearse/internal/contract"
)

// Shapes are the servers' replica and GPU counts, by name, as the
// aggregates of servers of several replicas need them.
func (r *Results) Shapes() map[string]contract.Shape {
	out := map[string]contract.Shape{}
	for _, s := range r.Servers {
		out[s.Name] = contract.Shape{Replicas: max(len(s.Replicas), 1), GPUs: s.GPUCount()}
	}
	return out
}

// Logs are the server's log files in the bundle: its own, each replica's
// and its router's.
func (s Server) Logs() []string {
	var out []string
	if s.Log != "" {
		out = append(out, s.Log)
	}
	for _, rp := range s.Replicas {
		if rp.Log != "" {
			out = append(out, rp.Log)
		}
	}
	if s.Router != nil && s.Router.Log != "" {
		out = append(out, s.Router.Log)
	}
	return out
}

// GPUCount is the server's distinct GPUs (0: not said).
func (s Server) GPUCount() int { return contract.DistinctGPUs(s.GPUs) }

// checkReplicas checks what a server of several replicas adds: each
// record's replica names one of its server's replicas (and only a
// client-balanced server's records name one), replica indices are their
// positions, and each mechanism-check series' max is its series' maximum.
func checkReplicas(res *Results) []Problem {
	probs := checkReplicaServers(res)
	servers := serversByName(res)
	for i := range res.Records {
		if p := recordReplicaProblem(i, &res.Records[i], servers); p != nil {
			probs = append(probs, *p)
		}
	}
	probs = append(probs, checkSessionReplicas(res.Records)...)
	return append(probs, checkReplicaSeries(res)...)
}

// serversByName indexes res's servers by name.
func serversByName(res *Results) map[string]Server {
	servers := map[string]Server{}
	for _, s := range res.Servers {
		servers[s.Name] = s
	}
	return servers
}

// checkReplicaServers checks that replica indices are their positions and
// GPU indices are indices.
func checkReplicaServers(res *Results) []Problem {
	var probs []Problem
	for i, s := range res.Servers {
		for j, rp := range s.Replicas {
			if rp.Index != j {
				probs = append(probs, Problem{File: ResultsFile, Server: s.Name, Field: fmt.Sprintf("servers[%d].replicas[%d].index", i, j),
					Msg: fmt.Sprintf("%d: a replica's index is its position", rp.Index)})
			}
		}
		for j, g := range s.GPUs {
			for _, x := range g {
				if x < 0 {
					probs = append(probs, Problem{File: ResultsFile, Server: s.Name, Field: fmt.Sprintf("servers[%d].gpus[%d]", i, j),
						Msg: fmt.Sprintf("%d is not a GPU index", x)})
				}
			}
		}
	}
	return probs
}

// recordReplicaProblem is what is wrong with the i-th record's replica, if
// anything: it must name one of its server's replicas, and only where the
// client balanced them.
func recordReplicaProblem(i int, r *contract.Record, servers map[string]Server) *Problem {
	if r.Replica == nil {
		return nil
	}
	s, ok := servers[r.Server]
	n := len(s.Replicas)
	field := fmt.Sprintf("records[%d].replica", i)
	switch {
	case !ok:
	case n == 0:
		return &Problem{File: ResultsFile, Server: r.Server, Field: field, Msg: fmt.Sprintf("%d, but server %s has no replicas", *r.Replica, r.Server)}
	case *r.Replica < 0 || *r.Replica >= n:
		return &Problem{File: ResultsFile, Server: r.Server, Field: field, Msg: fmt.Sprintf("%d is not one of the server's %d replicas (0 to %d)", *r.Replica, n, n-1)}
	case s.Router != nil:
		return &Problem{File: ResultsFile, Server: r.Server, Field: field, Msg: "set, but the server's requests went through its router, which chose the replica"}
	}
	return nil
}

// checkReplicaSeries checks that each mechanism-check series' max is its
// series' maximum, per label set and per replica.
func checkReplicaSeries(res *Results) []Problem {
	var probs []Problem
	if m := res.MechanismCheck; m != nil {
		check := func(field string, stored *float64, series [][2]float64) {
			if want := seriesMax(series); !closePtr(stored, want) {
				probs = append(probs, Problem{File: ResultsFile, Server: m.Server, Field: field,
					Msg: fmt.Sprintf("stored %s, series maximum %s", fmtPtr(stored), fmtPtr(want))})
			}
		}
		for i, ls := range m.LabelSets {
			check(fmt.Sprintf("mechanism_check.label_sets[%d].max", i), ls.Max, ls.Series)
		}
		for i, rs := range m.Replicas {
			check(fmt.Sprintf("mechanism_check.replicas[%d].max", i), rs.Max, rs.Series)
			for j, ls := range rs.LabelSets {
				check(fmt.Sprintf("mechanism_check.replicas[%d].label_sets[%d].max", i, j), ls.Max, ls.Series)
			}
		}
	}
	return probs
}

// seriesMax is the largest value of a [t, v] series, nil when empty.
func seriesMax(series [][2]float64) *float64 {
	var m *float64
	for _, s := range series {
		if m == nil || s[1] > *m {
			v := s[1]
			m = &v
		}
	}
	return m
}

// checkSessionReplicas checks that no session changed replica: with client
// balancing a session keeps to the replica of its first turn. A
// conversation is the records of one wave, client and session in start
// order, a new one at each first turn (one client may run a session
// again, a sustained wave's sessions back to back).
func checkSessionReplicas(recs []contract.Record) []Problem {
	type key struct{ wave, client, session int }
	idx := make([]int, 0)
	for i, r := range recs {
		if r.Session != nil && r.Replica != nil {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return recs[idx[a]].StartS < recs[idx[b]].StartS })
	first := map[key]int{} // the conversation's first record
	var probs []Problem
	for _, i := range idx {
		r := recs[i]
		k := key{r.Wave, r.Client, *r.Session}
		f, ok := first[k]
		if !ok || r.Turn <= 1 {
			first[k] = i
			continue
		}
		if *recs[f].Replica != *r.Replica {
			probs = append(probs, Problem{File: ResultsFile, Server: r.Server, Field: fmt.Sprintf("records[%d].replica", i),
				Msg: fmt.Sprintf("%d, but turn %d of session %d (client %d, wave %d) went to replica %d (records[%d]): a session keeps to one replica",
					*r.Replica, recs[f].Turn, *r.Session, r.Client, r.Wave, *recs[f].Replica, f)})
		}
	}
	return probs
}
