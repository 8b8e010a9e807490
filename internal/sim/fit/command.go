package fit

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/report"
)

// Command is what rehearse sim fit was asked to do, its flags checked: fit
// a profile to one server of Bundle (Options), set it beside the bundle's
// waves, write it to Output and print how each number was fitted.
type Command struct {
	// Bundle is the bundle fitted to.
	Bundle string
	Options
	// Output is where the profile JSON goes ("": nowhere;
	// bundle.StdoutPath: standard output, the derivation then on Stderr);
	// Write writes it there.
	Output string
	Write  func(data []byte) error
	// Markdown prints the derivation and the comparison as markdown.
	Markdown bool
	// Stdout and Stderr are the command's.
	Stdout, Stderr io.Writer
}

// UsageError is bad input found in the bundle: one that cannot be read,
// or a server or loads the fit refuses. A command exits 2 with it.
type UsageError struct{ Err error }

// Error is the refusal's one line.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap is the refusal's cause.
func (e *UsageError) Unwrap() error { return e.Err }

// Run fits the profile, compares it with the bundle's waves, writes it
// (Write) and prints the derivation and the comparison. Bad input is a
// *UsageError; Write's errors are returned as they are.
func (c Command) Run() error {
	res, err := bundle.ReadResults(c.Bundle)
	if err != nil {
		return &UsageError{fmt.Errorf("--bundle: %v", err)}
	}
	fitted, err := Profile(res, c.Options)
	if err != nil {
		return &UsageError{err}
	}
	cmp, err := Compare(res, fitted, c.Server, c.FitConcurrencies, nil)
	if err != nil {
		return err
	}
	// With -o - the profile is standard output's, the derivation stderr's.
	table := c.Stdout
	if c.Output != "" {
		data, err := fitted.Profile.Encode()
		if err != nil {
			return err
		}
		if err := c.Write(data); err != nil {
			return err
		}
		if c.Output == bundle.StdoutPath {
			table = c.Stderr
		}
	}
	c.print(table, fitted, cmp)
	return nil
}

// print prints the derivation and the measured-against-predicted table,
// as text or markdown.
func (c Command) print(w io.Writer, fitted *Result, cmp *Comparison) {
	p := fitted.Profile
	written := "not written (pass -o FILE)"
	if c.Output != "" {
		written = "written to " + c.Output
	}
	if c.Markdown {
		fmt.Fprintf(w, "Profile `%s` (%s engine), fitted to server `%s` of `%s` on its waves at %s clients; %s.\n\n",
			p.Name, p.Engine, c.Server, c.Bundle, report.Ints(c.FitConcurrencies), written)
		printMarkdown(w, fitted, cmp)
	} else {
		fmt.Fprintf(w, "profile %s (%s engine) fitted to server %s of %s on its waves at %s clients; %s\n",
			p.Name, p.Engine, c.Server, c.Bundle, report.Ints(c.FitConcurrencies), written)
		printText(w, fitted, cmp)
	}
	if fitted.CountedPerGeneratedToken != 1 {
		fmt.Fprintf(w, "\nGoodput and TPOT count generated tokens on both sides (the server's usage_completion_tokens): the bundle's text re-tokenized to %.4f tokens per generated one, an artifact of its text that the engine model does not reproduce.\n", fitted.CountedPerGeneratedToken)
	}
	for _, n := range cmp.Notes {
		fmt.Fprintf(w, "Note: %s.\n", n)
	}
}

// printMarkdown prints the derivation, what it leaves unexplained and the
// comparison as markdown.
func printMarkdown(w io.Writer, fitted *Result, cmp *Comparison) {
	fmt.Fprintf(w, "How each number was fitted:\n\n")
	for _, d := range fitted.Derivation {
		fmt.Fprintf(w, "- %s\n", d)
	}
	if len(fitted.Unexplained) > 0 {
		fmt.Fprintf(w, "\nWhat the fitted model does not explain:\n\n")
		for _, d := range fitted.Unexplained {
			fmt.Fprintf(w, "- %s\n", d)
		}
	}
	fmt.Fprintf(w, "\n| clients | waves | goodput tok/s, measured | predicted | error | p95 TTFT, measured | predicted | error | failures, measured | predicted |\n")
	fmt.Fprintf(w, "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range cmp.Rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(rowCells(r), " | "))
	}
}

// printText prints the derivation, what it leaves unexplained and the
// comparison as aligned text.
func printText(w io.Writer, fitted *Result, cmp *Comparison) {
	for _, d := range fitted.Derivation {
		fmt.Fprintf(w, "  %s\n", d)
	}
	for _, d := range fitted.Unexplained {
		fmt.Fprintf(w, "  not explained: %s\n", d)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "clients\twaves\tgoodput measured\tpredicted\terror\tp95 TTFT measured\tpredicted\terror\tfailures measured\tpredicted\t\n")
	for _, r := range cmp.Rows {
		fmt.Fprintf(tw, "%s\t\n", strings.Join(rowCells(r), "\t"))
	}
	tw.Flush()
}

// rowCells are one load's cells of the comparison, in the columns both
// forms print: clients, waves, then measured, predicted and error of
// goodput and of p95 TTFT, then measured and predicted failures.
func rowCells(r ComparisonRow) []string {
	return []string{strconv.Itoa(r.Concurrency), fittedLabel(r.Fitted),
		report.Goodput(r.Measured.Goodput), report.Goodput(r.Predicted.Goodput), report.Change(RelErr(r.Predicted.Goodput.Median, r.Measured.Goodput.Median)),
		report.Seconds(r.Measured.TTFT.P95), report.Seconds(r.Predicted.TTFT.P95), report.Change(RelErr(r.Predicted.TTFT.P95, r.Measured.TTFT.P95)),
		report.FailureCount(r.Measured.Failures), report.FailureCount(r.Predicted.Failures)}
}

// fittedLabel says whether a row's waves were fitted on or held out.
func fittedLabel(fitted bool) string {
	if fitted {
		return "fitted"
	}
	return "held out"
}
