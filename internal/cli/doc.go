// Package cli implements the rehearse command line: the cobra commands and
// their help, each binding its flags to an options struct and handing it to
// one call in the package that does the work, which validates it before any
// work (bench, bench serve and capacity: package benchcmd). What stays here
// is the command line's own: usage errors and exit statuses, -o files, the
// argument checks of a few commands that have no package of their own
// (export's vLLM files, k8s's worker command lines).
package cli

const usage = `rehearse rehearses LLM serving under load before production does.

It launches the servers under test, drives them through the OpenAI streaming
chat-completions API with closed-loop waves and open-loop arrivals, times every
streamed chunk, counts tokens exactly with the model's own tokenizer, aggregates
under a precise metric contract, and writes a self-verifying results bundle.

  rehearse demo                    the canonical rehearsal on two simulated servers
  rehearse run -f REHEARSAL.yaml   launch, drive and stop real servers; write a bundle
  rehearse bench --base-url URL    drive an endpoint that is already running
  rehearse sim                     run a simulated OpenAI-compatible server
  rehearse sim fit --bundle DIR    fit a simulator profile to a bundle's waves
  rehearse sim validate DIR        fit on some loads, tabulate the held-out error
  rehearse report DIR              re-render a bundle's README.md, figures and report.html
  rehearse verify DIR              check digests, schema and records, recompute every aggregate,
                                   re-count output tokens
  rehearse compare A B             put two bundles side by side, with gates
  rehearse export DIR --format F   write a bundle as vLLM's result JSON, an llm-d report,
                                   JSONL or CSV
  rehearse merge -o DIR A B ...    merge bundles of one rehearsal (or a split plan's
                                   segments) into one
  rehearse coordinate --workers N  release a split plan's waves on N workers together
  rehearse k8s --workers N ...     write the Kubernetes manifests that run a rehearsal as N
                                   segment workers (an Indexed Job) and merge their bundles
  rehearse annotate DIR -f NOTES   add an operator's notes to a bundle's report
  rehearse tokens                  count tokens of text with a tokenizer
  rehearse model write -o M.gguf   write a GGUF model of a given shape with random weights
                                   and a real tokenizer's vocabulary

Exit status: 0 success; 1 the work failed (a server failed, a bundle does not
verify, a gate tripped); 2 bad usage or bad input, with one line naming the
file, field, flag or value; 130 interrupted (a rehearsal still writes the
bundle of what finished).`
