// Package stream is the measuring instrument: an OpenAI streaming
// chat-completions client that stamps the arrival of every content chunk on
// the monotonic clock, classifies every failure into the kinds of SPEC §2,
// and keeps what arrived before a failure. For closed-loop waves it can
// pre-dial connections and hold requests that are already on their
// connections until one release, so a wave's requests leave together.
package stream
