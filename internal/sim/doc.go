// Package sim is a simulated OpenAI-compatible LLM server: a lock-serialized
// engine or an iteration-level continuous-batching engine whose step
// latencies come from a calibrated profile, run on a clock that can go K
// times faster than the wall clock. It serves /v1/chat/completions
// (streaming and not), /v1/models, /health and vLLM-named Prometheus
// /metrics; its output text re-tokenizes with the pinned tokenizer to
// exactly the tokens the engine emitted; and it injects seeded faults for
// the client's reliability tests.
package sim
