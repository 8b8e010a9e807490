package bundle

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

// TestSessionRunsAcrossSustainedWarmup: a sustained run's measured wave
// may open with a later turn of a session its warm-up wave began; a closed
// wave may not.
func TestSessionRunsAcrossSustainedWarmup(t *testing.T) {
	s := 0
	turn := func(wave, n int, start, end float64) contract.Record {
		return contract.Record{Wave: wave, Client: 0, Session: &s, Turn: n, StartS: start, EndS: end, OK: true}
	}
	waves := map[int]contract.Wave{
		1: {ID: 1, Kind: contract.KindWarmup, Mode: contract.ModeSustained},
		2: {ID: 2, Kind: contract.KindRecorded, Mode: contract.ModeSustained},
		3: {ID: 3, Kind: contract.KindRecorded, Mode: contract.ModeClosed},
	}
	r := &Results{Records: []contract.Record{turn(1, 1, 0, 1), turn(2, 2, 0, 1), turn(2, 3, 1.5, 2)}}
	probs, prev := sessionRuns(r, waves)
	if len(probs) != 0 || prev[2] != 1 || len(prev) != 1 {
		t.Errorf("sustained across its warm-up: problems %v, prev %v", probs, prev)
	}
	r = &Results{Records: []contract.Record{turn(3, 2, 0, 1)}}
	if probs, _ := sessionRuns(r, waves); len(probs) != 1 || !strings.Contains(probs[0].String(), "sent no turn 1 of it before") {
		t.Errorf("closed wave opening with turn 2: problems %v", probs)
	}
}
