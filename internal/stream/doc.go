// Package stream is the measuring instrument: an OpenAI streaming
// chat-completions client that stamps the arrival of every content chunk on
// the monotonic clock, classifies every failure into the kinds of SPEC §2
// (and client, for the load generator's own), and keeps what arrived before
// a failure. For closed-loop waves it can pre-dial connections and hold
// requests that are already on their connections until one release, so a
// wave's requests leave together; the release (Barrier, barrier.go) lets
// them go sixteen at a time with a network poll between, so a response
// that comes during the release is read, and stamped, then, not after the
// last request's write (a read takes one stamp for all it takes). A connection that sat unused is checked
// before a request is written on it, and a request whose stale connection
// carried none of its bytes is sent once more on a fresh one; a redirect is
// an outcome unless the request follows redirects.
//
// Two transports carry the requests. http:// base URLs reached without a
// proxy go over the client's own HTTP/1.1 path (h1.go, http1.go): one
// goroutine per request, a keep-alive pool per server, the request written
// in one write, the response head parsed by hand, and the body read over
// one buffer, each read system call stamped once and its chunked framing
// removed in place before the SSE decoder splits it into events, all of
// which get that read's stamp. On Linux that stamp is the kernel's receive
// time of the read's bytes (SO_TIMESTAMPNS, rxstamp_linux.go), moved onto
// the monotonic clock, so a client slow to read does not lengthen the times
// it records; REHEARSE_RXSTAMP=read stamps after each read instead, as
// net/http's path always does. https://, proxies and requests that follow
// redirects go over net/http, as does every request when the environment
// sets REHEARSE_HTTP=nethttp (for comparison; the stream tests run under
// both). Both give the same records and the same failure classes.
package stream
