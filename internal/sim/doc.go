// Package sim is a simulated OpenAI-compatible LLM server: a lock-serialized
// engine or an iteration-level continuous-batching engine whose step
// latencies come from a calibrated profile, run on a clock that can go K
// times faster than the wall clock. Each request's prefill costs its prompt
// tokens less those found in an optional vLLM-style prefix cache (hash
// chains of 16-token blocks, least recently used evicted within the KV
// budget), and its output runs to max_tokens under ignore_eos, else to a
// seeded natural length of its prompt within min_tokens and max_tokens. It serves /v1/chat/completions
// (streaming and not), /v1/models, /health and vLLM-named Prometheus
// /metrics; its output text re-tokenizes with the pinned tokenizer to
// exactly the tokens the engine emitted; and it injects seeded faults for
// the client's reliability tests.
//
// It also fits a profile to a results bundle's raw records of any load mode
// (FitProfile) and predicts a bundle's workload with a profile: closed waves
// (Predict), sustained loops (PredictSustained) and open-loop waves at a
// rate, along a ramp or replaying a trace (PredictOpen), each prompt with its
// own length. A prediction is the same engine stepped on a virtual clock (one
// step model, Profile.stepModelS, for both), its records aggregated by the
// metric contract, so predicted and measured figures are defined alike
// (Compare, Validate).
package sim
