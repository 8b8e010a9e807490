package supervise

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
	"unicode/utf8"
)

// LogNotes is what a server log says, split at the deliberate-stop marker:
// warnings and errors while the rehearsal ran are findings; what follows the
// stop is shutdown noise (the seed's EngineDeadError) and is never a
// benchmark failure.
type LogNotes struct {
	Path  string `json:"path"`
	Lines int    `json:"lines"`
	// Stopped is true when the log holds the deliberate-stop marker.
	Stopped bool `json:"stopped"`
	// StopLine is the 1-based line of the marker (0 without one).
	StopLine int `json:"stop_line,omitempty"`
	// WarningsDuringRun are warning and error lines before the stop, at
	// most MaxNoteLines of them; WarningsDuringRunCount counts them all.
	WarningsDuringRun      []string `json:"warnings_during_run"`
	WarningsDuringRunCount int      `json:"warnings_during_run_count"`
	// ShutdownNoise are warning and error lines after the stop marker.
	ShutdownNoise      []string `json:"shutdown_noise"`
	ShutdownNoiseCount int      `json:"shutdown_noise_count"`
	// ShutdownLines counts every line after the marker.
	ShutdownLines int `json:"shutdown_lines"`
	// DiedEarly is the tool's line saying the process exited before it
	// was stopped, when there is one.
	DiedEarly string `json:"died_early,omitempty"`
}

// MaxNoteLines bounds the lines kept per list; the counts say how many
// there were in all.
const MaxNoteLines = 50

var noteRE = regexp.MustCompile(`(?i)\b(warn|warning|warnings|error|errors|exception|traceback|fatal|critical|panic)\b|EngineDeadError|Error:`)

// noteworthy reports whether a log line is a warning or an error. A
// key=value field of a request log line ("error=..." on a request the
// client abandoned) is a request's outcome, already in the records, not a
// server warning.
func noteworthy(line string) bool {
	for _, m := range noteRE.FindAllStringIndex(line, -1) {
		if m[1] < len(line) && line[m[1]] == '=' {
			continue
		}
		return true
	}
	return false
}

// MaxNoteLineBytes bounds a kept line; longer ones end in "…".
const MaxNoteLineBytes = 300

func clip(line string) string {
	if len(line) <= MaxNoteLineBytes {
		return line
	}
	cut := MaxNoteLineBytes
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return line[:cut] + "…"
}

// ScanLog reads a server log written under supervision and splits its
// noteworthy lines at the deliberate-stop marker.
func ScanLog(path string) (LogNotes, error) {
	n := LogNotes{Path: path, WarningsDuringRun: []string{}, ShutdownNoise: []string{}}
	f, err := os.Open(path)
	if err != nil {
		return n, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		n.Lines++
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.HasPrefix(line, MarkerPrefix) {
			if !n.Stopped && strings.Contains(line, StopMarker) {
				n.Stopped, n.StopLine = true, n.Lines
			}
			if strings.Contains(line, EarlyDeathMarker) && n.DiedEarly == "" {
				n.DiedEarly = strings.TrimPrefix(line, MarkerPrefix)
			}
			continue
		}
		if n.Stopped {
			if strings.TrimSpace(line) != "" {
				n.ShutdownLines++
			}
			if noteworthy(line) {
				n.ShutdownNoiseCount++
				if len(n.ShutdownNoise) < MaxNoteLines {
					n.ShutdownNoise = append(n.ShutdownNoise, clip(line))
				}
			}
			continue
		}
		if noteworthy(line) {
			n.WarningsDuringRunCount++
			if len(n.WarningsDuringRun) < MaxNoteLines {
				n.WarningsDuringRun = append(n.WarningsDuringRun, clip(line))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return n, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}
