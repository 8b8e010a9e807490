// Package stream is the measuring instrument: an OpenAI streaming
// chat-completions client that stamps the arrival of every content chunk on
// the monotonic clock, classifies every failure into the kinds of SPEC §2,
// and keeps what arrived before a failure. It can pre-dial connections so
// that a closed-loop wave is released with its connections already open.
package stream
