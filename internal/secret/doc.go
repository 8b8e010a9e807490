// Package secret finds the values rehearse must never write — an API key,
// the values of redacted flags and variables, a URL's password — in text,
// and replaces each with Redacted. One Matcher serves both the
// stream of a server's log (package supervise, which holds back a tail
// that may begin a secret) and whole strings: a record's text, reasoning,
// tool calls and error, a note, a progress line (Set.Scrub).
package secret
