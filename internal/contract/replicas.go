package contract

// Shape is what the aggregates need of a server of several replicas: its
// replica count and its distinct GPUs (0: not known).
type Shape struct{ Replicas, GPUs int }

// DistinctGPUs is the number of distinct GPUs in a server's GPU sets (one
// set per replica; 0 when none is said).
func DistinctGPUs(sets [][]int) int {
	seen := map[int]bool{}
	for _, set := range sets {
		for _, g := range set {
			seen[g] = true
		}
	}
	return len(seen)
}

// ApplyReplicas sets the figures of servers of several replicas or GPUs on
// aggs (SPEC §10): GPUCount and GoodputPerGPU where gpus gives the server's
// GPU count (> 0), and ReplicaRequests where the population's records name
// a replica (client balancing), one count per replica of the server's shape.
// Both are recomputable from the records and the servers' shapes alone.
func ApplyReplicas(aggs []Aggregate, waves []Wave, records []Record, shapes map[string]Shape) {
	c := NewReplicaCounter(waves)
	for i := range records {
		c.Add(&records[i])
	}
	c.Apply(aggs, shapes)
}

// ReplicaCounter counts, one record at a time, the recorded attempts each
// replica of a population was sent (the streaming form of ApplyReplicas:
// verify reads a bundle's records once and keeps none).
type ReplicaCounter struct {
	keys   map[int]Key // recorded wave id → its population
	counts map[Key][]int
}

// NewReplicaCounter starts the counts of the recorded waves of waves.
func NewReplicaCounter(waves []Wave) *ReplicaCounter {
	c := &ReplicaCounter{keys: map[int]Key{}, counts: map[Key][]int{}}
	for _, w := range waves {
		if w.Kind == KindRecorded {
			c.keys[w.ID] = KeyOf(w)
		}
	}
	return c
}

// Add counts one record.
func (c *ReplicaCounter) Add(r *Record) {
	if r.Kind != KindRecorded || r.Replica == nil || *r.Replica < 0 {
		return
	}
	k, ok := c.keys[r.Wave]
	if !ok {
		return
	}
	counts := c.counts[k]
	for len(counts) <= *r.Replica {
		counts = append(counts, 0)
	}
	counts[*r.Replica]++
	c.counts[k] = counts
}

// Apply sets GPUCount, GoodputPerGPU and ReplicaRequests on aggs.
func (c *ReplicaCounter) Apply(aggs []Aggregate, shapes map[string]Shape) {
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
		a.ReplicaRequests = nil
		if counts, ok := c.counts[a.Key()]; ok {
			out := make([]int, max(len(counts), sh.Replicas))
			copy(out, counts)
			a.ReplicaRequests = out
		}
	}
}
