package contract

import "testing"

func TestIsPercentileMethod(t *testing.T) {
	for _, name := range []string{
		PercentileMethod, "linear", "Linear", "type7", "type 7", "Type-7", "hyndman-fan type 7",
		"Hyndman–Fan type 7", "R-7", "numpy: linear", "linear interpolation between closest ranks",
		"inclusive", "PERCENTILE.INC",
	} {
		if !IsPercentileMethod(name) {
			t.Errorf("%q names type 7 and is refused", name)
		}
	}
	for _, name := range []string{
		"nearest", "nearest rank", "lower", "higher", "midpoint", "type 6", "hyndman-fan type 8",
		"type 7 or type 4", "exclusive", "interpolated_inverted_cdf", "weibull", "t-digest", "7", "",
	} {
		if IsPercentileMethod(name) {
			t.Errorf("%q is not type 7 and is accepted", name)
		}
	}
}
