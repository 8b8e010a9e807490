package validate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/sim/fit"
)

// Options is what rehearse sim validate was asked to do, its flags
// checked.
type Options struct {
	// Bundle is the bundle fitted on; HoldBundle the one whose loads are
	// held out ("": Bundle).
	Bundle, HoldBundle string
	// FitOn and HoldOut are the loads as given (the file and the live
	// bundle's command line record them); FitLoads and HoldLoads the same
	// parsed (fit.ParseLoads).
	FitOn, HoldOut      string
	FitLoads, HoldLoads []fit.Load
	// Servers are the --server NAME=ENGINE given (none: every server of
	// the bundle, its engine from its launch argv).
	Servers []string
	// Output is the file the table goes to as JSON (bundle.StdoutPath:
	// standard output, the table then on Stderr); Write writes it there.
	Output string
	Write  func(data []byte) error
	// LiveBundle keeps the live run's bundle ("": a temporary folder,
	// removed); NoLive predicts only.
	LiveBundle string
	NoLive     bool
	// TimeScale is the live simulator's time scale.
	TimeScale float64
	// MaxModelLen of the fitted profiles.
	MaxModelLen int
	// JSON and Markdown choose how the table is printed (neither: text).
	JSON, Markdown bool
	// Jitter also fits a seeded step jitter.
	Jitter bool
	// Stdout and Stderr are the command's.
	Stdout, Stderr io.Writer
}

// usage is bad input found once the bundles are read (a bundle that
// cannot be read, a server it lacks, loads the fit refuses, a live run
// that cannot be made): a *fit.UsageError, with which the command exits 2.
func usage(format string, a ...any) error { return &fit.UsageError{Err: fmt.Errorf(format, a...)} }

// file is what Output stores.
type file struct {
	Bundle     string             `json:"bundle"`
	HoldBundle string             `json:"hold_out_bundle,omitempty"`
	FitOn      string             `json:"fit_on"`
	HoldOut    string             `json:"hold_out"`
	TimeScale  float64            `json:"live_time_scale,omitempty"`
	Profiles   []*engine.Profile  `json:"profiles"`
	Rows       []fit.ErrorRow     `json:"rows"`
	Unexplain  []string           `json:"not_explained,omitempty"`
	Notes      []string           `json:"notes,omitempty"`
	CountRatio map[string]float64 `json:"bundle_counted_per_generated_token"`
}

// Run fits, predicts and (unless NoLive) runs live the held-out loads of
// every chosen server, writes the table to Output and prints it. Bad input
// is a *fit.UsageError; the live run's and Write's errors are returned as they
// are.
func Run(ctx context.Context, o Options) error {
	res, hold, servers, notes, err := o.read()
	if err != nil {
		return err
	}
	var vals []*fit.Validation
	for _, s := range servers {
		v, err := fit.Validate(res, fit.ValidateOptions{Server: s.Name, Engine: s.Engine, FitOn: o.FitLoads, HoldOut: o.HoldLoads, HeldOut: hold, Jitter: o.Jitter, MaxModelLen: o.MaxModelLen})
		if err != nil {
			return usage("%v", err)
		}
		vals = append(vals, v)
	}
	if !o.NoLive {
		if err := o.live(ctx, hold, vals); err != nil {
			return err
		}
	}
	f := o.file(notes, vals)
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := o.Write(append(data, '\n')); err != nil {
		return err
	}
	return o.print(f.Rows, notes, vals)
}

// read reads the bundle and the held-out one (the same unless HoldBundle),
// each in simulated time where its servers were simulated (the notes say
// so), and chooses the servers.
func (o Options) read() (res, hold *bundle.Results, servers []Server, notes []string, err error) {
	if res, err = bundle.ReadResults(o.Bundle); err != nil {
		return nil, nil, nil, nil, usage("sim validate: %v", err)
	}
	if servers, err = Servers(res, o.Servers); err != nil {
		return nil, nil, nil, nil, err
	}
	if n := fit.InSimulatedTime(res, "the bundle", o.TimeScale); n != "" {
		notes = append(notes, n)
	}
	hold = res
	if o.HoldBundle == "" {
		return res, hold, servers, notes, nil
	}
	if hold, err = bundle.ReadResults(o.HoldBundle); err != nil {
		return nil, nil, nil, nil, usage("sim validate: --hold-out-bundle: %v", err)
	}
	if n := fit.InSimulatedTime(hold, "the held-out bundle", o.TimeScale); n != "" {
		notes = append(notes, n)
	}
	for _, s := range servers {
		if !slices.Contains(hold.ServerNames(), s.Name) {
			return nil, nil, nil, nil, usage("sim validate: --hold-out-bundle %s has no server %s (have: %s)", o.HoldBundle, s.Name, strings.Join(hold.ServerNames(), ", "))
		}
	}
	return res, hold, servers, notes, nil
}

// file is what Output stores: the profiles fitted, the rows of every
// validation, what the fits leave unexplained, and the notes.
func (o Options) file(notes []string, vals []*fit.Validation) file {
	f := file{Bundle: o.Bundle, HoldBundle: o.HoldBundle, FitOn: o.FitOn, HoldOut: o.HoldOut, CountRatio: map[string]float64{}, Notes: notes}
	if !o.NoLive {
		f.TimeScale = o.TimeScale
	}
	var rows []fit.ErrorRow
	for _, v := range vals {
		f.Profiles = append(f.Profiles, v.Fit.Profile)
		f.CountRatio[v.Server] = v.Fit.CountedPerGeneratedToken
		for _, u := range v.Fit.Unexplained {
			f.Unexplain = append(f.Unexplain, v.Server+": "+u)
		}
		rows = append(rows, v.Rows...)
	}
	f.Rows = rows
	return f
}

// print prints the error table and the notes: on Stdout, or on Stderr
// where the file went to standard output.
func (o Options) print(rows []fit.ErrorRow, notes []string, vals []*fit.Validation) error {
	w := o.Stdout
	if o.Output == bundle.StdoutPath {
		w = o.Stderr
	}
	switch {
	case o.JSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if rows == nil {
			rows = []fit.ErrorRow{}
		}
		return enc.Encode(rows)
	default:
		fit.WriteTable(w, rows, o.Markdown)
	}
	for _, n := range notes {
		fmt.Fprintf(w, "Note: %s.\n", n)
	}
	for _, v := range vals {
		for _, n := range v.Notes {
			fmt.Fprintf(w, "Note: %s: %s.\n", v.Server, n)
		}
	}
	if o.Output != bundle.StdoutPath {
		fmt.Fprintf(w, "The table is written to %s.\n", o.Output)
	}
	return nil
}
