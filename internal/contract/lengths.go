package contract

// Lengths summarizes a population of token counts per request: how many
// requests it holds, their mean and type-7 percentiles. An empty population
// has N 0 and every figure null, never 0.
type Lengths struct {
	N    int      `json:"n"`
	Mean *float64 `json:"mean"`
	P50  *float64 `json:"p50"`
	P90  *float64 `json:"p90"`
	P99  *float64 `json:"p99"`
}

// SummarizeLengths returns the mean and percentiles of counts. counts is
// not modified.
func SummarizeLengths(counts []float64) Lengths {
	s := sortedCopy(counts)
	l := Lengths{N: len(s), P50: Percentile(s, 0.50), P90: Percentile(s, 0.90), P99: Percentile(s, 0.99)}
	if len(s) > 0 {
		sum := 0.0
		for _, v := range s {
			sum += v
		}
		m := sum / float64(len(s))
		l.Mean = &m
	}
	return l
}

// TrafficLengths are the token-length populations of a load's traffic:
// Input the client-counted input_tokens of every recorded attempt that
// carries one (failed attempts too: their prompts were sent; a record
// without a count is left out), Output the output_tokens of the successful
// records (a failed request's partial output is not a length).
type TrafficLengths struct {
	Input, Output []float64
}

// Add pools r's lengths.
func (t *TrafficLengths) Add(r Record) {
	if r.InputTokens != nil {
		t.Input = append(t.Input, float64(*r.InputTokens))
	}
	if r.OK {
		t.Output = append(t.Output, float64(r.OutputTokens))
	}
}
