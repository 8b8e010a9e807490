package sim

import (
	"fmt"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

func TestDbgLengths(t *testing.T) {
	res, err := bundle.ReadResults("/tmp/sf/lengths")
	if err != nil {
		t.Skip(err)
	}
	res.Waves, res.Records = SlowedDown(res.Waves, res.Records, 50)
	for _, eng := range []string{"serial", "batching"} {
		f, err := FitProfile(res, FitOptions{Server: eng, Engine: eng, FitConcurrencies: []int{1, 32}, FitLoads: []contract.Key{{Mode: contract.ModeOpen, RequestRateRPS: 0.1}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Derivation {
			fmt.Println(d)
		}
	}
}
