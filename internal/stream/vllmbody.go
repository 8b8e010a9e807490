package stream

import (
	"fmt"
	"net/textproto"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// vllmBody reshapes a request body built by Prepare into the one vllm bench
// serve sends: no temperature (the sampling fields it was given come in
// ExtraBody, merged last); completions add repetition_penalty 1.0 and
// logprobs null (ExtraBody's logprobs, from --logprobs, replaces it); chat
// sends max_completion_tokens instead of max_tokens and a lone prompt as
// one text part of the user's content.
func vllmBody(body map[string]any, req Request, completions bool) {
	delete(body, "temperature")
	if completions {
		body["repetition_penalty"] = 1.0
		body["logprobs"] = nil
		return
	}
	body["max_completion_tokens"] = body["max_tokens"]
	delete(body, "max_tokens")
	if req.Messages == nil {
		body["messages"] = []map[string]any{{
			"role":    "user",
			"content": []map[string]string{{"type": "text", "text": req.Prompt}},
		}}
	}
}

// requestHeaders are the headers req sends after the client's own: its
// Headers, then x-request-id. A name or value HTTP cannot carry is refused
// naming the header, never its value (a header's value is a secret).
func requestHeaders(req Request) ([]Header, error) {
	var out []Header
	for _, h := range req.Headers {
		name := textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(h.Name))
		switch {
		case !httpguts.ValidHeaderFieldName(name):
			return nil, fmt.Errorf("header %q: not a header name", h.Name)
		case !httpguts.ValidHeaderFieldValue(h.Value):
			return nil, fmt.Errorf("header %s: its value holds a character a header cannot carry", name)
		case reservedHeader(name):
			return nil, fmt.Errorf("header %s: the client sets it itself", name)
		}
		out = setHeader(out, Header{Name: name, Value: h.Value})
	}
	if req.RequestID != "" {
		if !httpguts.ValidHeaderFieldValue(req.RequestID) {
			return nil, fmt.Errorf("request id %q: holds a character a header cannot carry", req.RequestID)
		}
		out = setHeader(out, Header{Name: "X-Request-Id", Value: req.RequestID})
	}
	return out, nil
}

// ReservedHeaders are the headers the client writes itself, which a
// request's Headers may not set.
var ReservedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection"}

func reservedHeader(name string) bool {
	for _, r := range ReservedHeaders {
		if strings.EqualFold(r, name) {
			return true
		}
	}
	return false
}

// setHeader sets h in hs, replacing a header of the same name (a later
// --header wins, as in vLLM's dict).
func setHeader(hs []Header, h Header) []Header {
	for i := range hs {
		if strings.EqualFold(hs[i].Name, h.Name) {
			hs[i] = h
			return hs
		}
	}
	return append(hs, h)
}

// overrides reports whether the request's own headers replace the client's
// header of that name.
func (p *Prepared) overrides(name string) bool {
	for _, h := range p.headers {
		if strings.EqualFold(h.Name, name) {
			return true
		}
	}
	return false
}
