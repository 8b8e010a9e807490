package report

import (
	"fmt"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// serverUsage is one server's token exactness check (SPEC §2): its
// aggregates' usage_disagreement added up.
type serverUsage struct {
	Server string
	contract.UsageDisagreement
}

// usageChecks are the servers' token exactness checks, a server in the
// order its aggregates come, those with no record carrying usage left out;
// none when output tokens were taken from the servers' usage (nothing was
// re-counted to hold against it).
func usageChecks(res *bundle.Results) []serverUsage {
	if res.Provenance.OutputTokensSource == bundle.SourceUsage {
		return nil
	}
	var out []serverUsage
	at := map[string]int{}
	for _, a := range res.Aggregates {
		if a.UsageDisagreement == nil {
			continue
		}
		i, ok := at[a.Server]
		if !ok {
			i = len(out)
			at[a.Server] = i
			out = append(out, serverUsage{Server: a.Server})
		}
		out[i].Merge(*a.UsageDisagreement)
	}
	return out
}

// UsageWarnings are the terminal's and the report's warnings of token
// exactness: one line per server whose re-counts differ from its usage,
// "naive: 12 of 64 records' re-counted output tokens differ ...".
func UsageWarnings(res *bundle.Results) []string {
	var out []string
	for _, u := range usageChecks(res) {
		if u.Count > 0 {
			out = append(out, fmt.Sprintf("%s: %d of %d records' re-counted output tokens differ from the server's usage.completion_tokens (largest difference %+d tokens, re-count minus usage): a tokenizer that is not the model's, text that re-tokenizes otherwise (random weights), or a server that counts differently",
				u.Server, u.Count, u.Compared, u.LargestDiff))
		}
	}
	return out
}

// usageSummary is the Environment section's line on token exactness: how
// each server's re-counts stood against its usage; "" when no record
// carried usage or nothing was re-counted.
func usageSummary(res *bundle.Results) string {
	checks := usageChecks(res)
	if len(checks) == 0 {
		return ""
	}
	parts := make([]string, len(checks))
	for i, u := range checks {
		if u.Count == 0 {
			parts[i] = fmt.Sprintf("`%s` equal on all %d records that carry usage", u.Server, u.Compared)
		} else {
			parts[i] = fmt.Sprintf("`%s` different on %d of %d (largest difference %+d tokens; see the warnings)", u.Server, u.Count, u.Compared, u.LargestDiff)
		}
	}
	return "- Re-counts against each server's `usage.completion_tokens`, record by record: " + strings.Join(parts, "; ") + ".\n"
}
