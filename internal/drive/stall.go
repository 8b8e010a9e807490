package drive

import (
	"slices"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
)

// StallPeriod is how often a wave's stall watch asks the runtime to wake
// it; how late each wake-up comes is the client's own scheduling stall.
const StallPeriod = 5 * time.Millisecond

// stallWatch is a goroutine that measures, from a wave's release to its
// end, how late the Go runtime wakes a timer: on a loaded host the same
// stalls delay the client's reading of streamed tokens.
type stallWatch struct {
	stop chan struct{}
	done chan *contract.Stalls
}

// startStallWatch starts a watch that sleeps period at a time and reads
// the clock with now (time.Now but in tests).
func startStallWatch(period time.Duration, now func() time.Time) *stallWatch {
	sw := &stallWatch{stop: make(chan struct{}), done: make(chan *contract.Stalls, 1)}
	go func() {
		var lates []float64
		timer := time.NewTimer(period)
		defer timer.Stop()
		due := now().Add(period)
		for {
			select {
			case <-sw.stop:
				sw.done <- summarizeStalls(period, lates)
				return
			case <-timer.C:
			}
			woke := now()
			lates = append(lates, max(0, woke.Sub(due).Seconds()))
			due = woke.Add(period)
			timer.Reset(period)
		}
	}()
	return sw
}

// end stops the watch and returns its summary; a nil watch has none.
func (sw *stallWatch) end() *contract.Stalls {
	if sw == nil {
		return nil
	}
	close(sw.stop)
	return <-sw.done
}

// summarizeStalls is the summary of the lateness of each wake-up, in
// seconds; nil when the watch never woke.
func summarizeStalls(period time.Duration, lates []float64) *contract.Stalls {
	if len(lates) == 0 {
		return nil
	}
	slices.Sort(lates)
	st := &contract.Stalls{PeriodS: period.Seconds(), Ticks: len(lates), MaxS: lates[len(lates)-1]}
	if p := contract.Percentile(lates, 0.99); p != nil {
		st.P99S = *p
	}
	for _, l := range lates {
		if l > contract.StallThresholdS {
			st.Over++
		}
	}
	return st
}

// watchStalls starts the wave's stall watch, unless the driver's tests
// turned it off.
func (d *Driver) watchStalls() *stallWatch {
	if d.stallPeriod < 0 {
		return nil
	}
	period := d.stallPeriod
	if period == 0 {
		period = StallPeriod
	}
	now := d.stallNow
	if now == nil {
		now = time.Now
	}
	return startStallWatch(period, now)
}
