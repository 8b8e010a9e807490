package contract

// UsageDisagreement is SPEC §2's token exactness check over an aggregate's
// recorded records: each record that carries the server's
// usage_completion_tokens is compared with its own count, output_tokens
// plus reasoning_tokens (the server's usage counts every generated token,
// reasoning included). A redacted record is left out (verify cannot
// re-count its text), and so is one with tool-call text (that text is
// kept, not counted). A tokenizer that is not the model's shows here
// first; text from random weights, whose decoded tokens re-tokenize
// otherwise, shows here too.
type UsageDisagreement struct {
	// Compared is how many records were compared.
	Compared int `json:"compared"`
	// Count is how many of them differ.
	Count int `json:"count"`
	// LargestDiff is the re-count minus the usage of largest size among
	// them (of two of one size, the positive); 0 when none differ.
	LargestDiff int `json:"largest_diff"`
}

// usageCounted reports whether r's own count can be held against the
// server's usage (UsageDisagreement), and its own count.
func usageCounted(r *Record) (counted int, ok bool) {
	if r.UsageCompletionTokens == nil || r.Redacted || r.ToolCallText != "" {
		return 0, false
	}
	counted = r.OutputTokens
	if r.ReasoningTokens != nil {
		counted += *r.ReasoningTokens
	}
	return counted, true
}

// Add compares r, where it can be compared.
func (u *UsageDisagreement) Add(r *Record) {
	counted, ok := usageCounted(r)
	if !ok {
		return
	}
	u.Compared++
	d := counted - *r.UsageCompletionTokens
	if d == 0 {
		return
	}
	u.Count++
	u.LargestDiff = largerDiff(u.LargestDiff, d)
}

// Merge adds o's comparisons to u's (a server's over its aggregates).
func (u *UsageDisagreement) Merge(o UsageDisagreement) {
	u.Compared += o.Compared
	u.Count += o.Count
	u.LargestDiff = largerDiff(u.LargestDiff, o.LargestDiff)
}

// largerDiff is the larger of two differences by size, the positive of
// two of one size: the same whatever order records come in.
func largerDiff(a, b int) int {
	abs := func(x int) int { return max(x, -x) }
	switch {
	case abs(b) > abs(a):
		return b
	case abs(b) == abs(a):
		return max(a, b)
	}
	return a
}
