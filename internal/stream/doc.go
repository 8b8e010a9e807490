// Package stream is the measuring instrument: an OpenAI streaming
// chat-completions client that stamps the arrival of every content chunk on
// the monotonic clock, classifies every failure into the kinds of SPEC §2
// (and client, for the load generator's own), and keeps what arrived before
// a failure. For closed-loop waves it can pre-dial connections and hold
// requests that are already on their connections until one release, so a
// wave's requests leave together. A connection that sat unused is checked
// before a request is written on it, and a request whose stale connection
// carried none of its bytes is sent once more on a fresh one; a redirect is
// an outcome unless the request follows redirects.
package stream
