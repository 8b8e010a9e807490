package benchcmd

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/rehearsal"
)

// ProgressFlag registers --progress, the live view of bench, run and demo.
func ProgressFlag(f *pflag.FlagSet, mode *string) {
	f.StringVar(mode, "progress", config.DefaultProgress, "live per-request view of each wave on stderr: auto (when stderr is a terminal), always, never")
}

// CheckProgress refuses a --progress that is not auto, always or never.
func CheckProgress(mode string) error {
	switch mode {
	case config.ProgressAuto, config.ProgressAlways, config.ProgressNever:
		return nil
	}
	return usageError("--progress %q: want %s, %s or %s", mode, config.ProgressAuto, config.ProgressAlways, config.ProgressNever)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// WaveBar draws one progress bar per wave on stderr, advanced as each
// request ends: the server, the load and the repeat, the requests ended of
// the wave's total and how many failed, and the time since the release.
// Off a terminal (mode auto) it draws nothing: the runner's line per wave
// is the plain view.
type WaveBar struct {
	w       io.Writer
	enabled bool
	// clear removes a finished wave's bar, for a command that prints a
	// line per wave of its own in its place (run, demo).
	clear bool
	bar   *progressbar.ProgressBar
}

// NewWaveBar is the bar of mode (--progress) on w; clear removes each
// finished wave's bar (run, demo print a line per wave of their own).
func NewWaveBar(w io.Writer, mode string, clear bool) *WaveBar {
	on := mode == config.ProgressAlways || (mode == config.ProgressAuto && isTerminal(w))
	return &WaveBar{w: w, enabled: on, clear: clear}
}

func (p *WaveBar) Event(ev rehearsal.WaveEvent) {
	if !p.enabled {
		return
	}
	w := ev.Wave
	label := fmt.Sprintf("%s %s c=%d r=%d", w.Server, w.Kind, w.Concurrency, w.Repeat)
	if w.Mode == contract.ModeOpen {
		label = fmt.Sprintf("%s %s %s r=%d", w.Server, w.Kind, contract.KeyOf(w).LoadLabel(), w.Repeat)
	}
	switch ev.Kind {
	case rehearsal.WaveReleased:
		opts := []progressbar.Option{
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(label),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionThrottle(100 * time.Millisecond),
			progressbar.OptionSetWidth(30),
		}
		if p.clear {
			opts = append(opts, progressbar.OptionClearOnFinish())
		}
		p.bar = progressbar.NewOptions(ev.Total, opts...)
	case rehearsal.RequestEnded:
		if p.bar != nil {
			p.bar.Describe(fmt.Sprintf("%s failed %d", label, ev.Failed))
			p.bar.Add(1)
		}
	case rehearsal.WaveEnded:
		if p.bar != nil {
			p.bar.Describe(fmt.Sprintf("%s failed %d", label, ev.Failed))
			p.bar.Finish()
			if !p.clear {
				// The finished bar stays: bench prints no line per
				// wave of its own.
				fmt.Fprintln(p.w)
			}
			p.bar = nil
		}
	}
}

// Close ends a bar left open by an interrupted wave.
func (p *WaveBar) Close() {
	if p.bar != nil {
		p.bar.Exit()
		fmt.Fprintln(p.w)
		p.bar = nil
	}
}
