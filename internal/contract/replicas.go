package contract

// Shape is what the aggregates need of a server of several replicas: its
// replica count and its distinct GPUs (0: not known).
type Shape struct{ Replicas, GPUs int }

// ApplyReplicas sets the figures of servers of several replicas or GPUs on
// aggs (SPEC §10): GPUCount and GoodputPerGPU where gpus gives the server's
// GPU count (> 0), and ReplicaRequests where the population's records name
// a replica (client balancing), one count per replica of the server's shape.
// Both are recomputable from the records and the servers' shapes alone.
func ApplyReplicas(aggs []Aggregate, waves []Wave, records []Record, shapes map[string]Shape) {
	for i := range aggs {
		a := &aggs[i]
		sh := shapes[a.Server]
		if n := sh.GPUs; n > 0 {
			a.GPUCount = n
			per := make([]float64, len(a.Goodput.PerRepeat))
			for j, g := range a.Goodput.PerRepeat {
				per[j] = g / float64(n)
			}
			s := SpreadOf(per)
			a.GoodputPerGPU = &s
		}
		var counts []int
		EachPooled(waves, records, a.Key(), func(r Record) {
			if r.Replica == nil || *r.Replica < 0 {
				return
			}
			if counts == nil {
				counts = make([]int, sh.Replicas)
			}
			for len(counts) <= *r.Replica {
				counts = append(counts, 0)
			}
			counts[*r.Replica]++
		})
		a.ReplicaRequests = counts
	}
}
