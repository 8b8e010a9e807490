// Package sim is a simulated OpenAI-compatible LLM server: the HTTP face of
// the engine model in package engine, a lock-serialized engine or an
// iteration-level continuous-batching one whose step latencies come from a
// calibrated profile, run on a clock that can go K times faster than the
// wall clock. A request's output runs to max_tokens under ignore_eos, else
// to a seeded natural length of its prompt within min_tokens and
// max_tokens. It serves /v1/chat/completions and /v1/completions
// (streaming and not, with an optional reasoning phase or tool call),
// /v1/models, /health and vLLM-named Prometheus /metrics; its output text
// re-tokenizes with the pinned tokenizer to exactly the tokens the engine
// emitted; and it injects seeded faults for the client's reliability tests.
// Command is rehearse sim itself: its settings checked and turned into
// Options, the server listening and serving until its context ends.
//
// Beside it: package engine holds the engine model and the profiles that
// this server and the predictor share, package predict steps that engine
// on a virtual clock to predict a workload's records and a capacity
// bracket, package fit fits a profile to a results bundle and validates
// it on held-out loads, and package validate runs rehearse sim validate
// (its live run through the runner, above it). Nothing there imports this
// package.
package sim
