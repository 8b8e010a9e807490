package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/rehearse/rehearse/internal/endpoint"
)

// Template builds the requests of a multi-turn session at send time, when
// the history is known: everything but the messages and max_tokens is
// marshalled once, and a session keeps its messages encoded (AppendMessage),
// so a turn's body costs one copy of the history and the encoding of the
// messages new since the last turn. Prepare remains the path of a fixed
// prompt, built once per prompt.
type Template struct {
	// proto is the request without its body.
	proto Prepared
	// head is the body's object up to and including `"max_tokens":`, or
	// `"messages":[` where ExtraBody sets max_tokens itself.
	head     []byte
	fixedMax bool
}

// NewTemplate validates req as Prepare does and keeps all of it but its
// prompt, messages and max_tokens.
func NewTemplate(req Request) (*Template, error) {
	if endpoint.IsCompletions(req.Endpoint) {
		return nil, fmt.Errorf("endpoint %s is the completions API: multi-turn sessions need a chat endpoint such as %s", req.Endpoint, endpoint.Default)
	}
	probe := req
	probe.Messages, probe.Prompt, probe.MaxTokens = nil, "", 0
	p, err := Prepare(probe)
	if err != nil {
		return nil, err
	}
	body := bodyFields(req)
	for k, v := range req.ExtraBody {
		body[k] = v
	}
	delete(body, "messages")
	_, fixedMax := req.ExtraBody["max_tokens"]
	data, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("request body: %v", err)
	}
	p.body = nil
	head := append(data[:len(data)-1:len(data)-1], ',')
	if fixedMax {
		head = append(head, `"messages":[`...)
	} else {
		head = append(head, `"max_tokens":`...)
	}
	return &Template{proto: *p, head: head, fixedMax: fixedMax}, nil
}

// AppendMessage appends m, JSON-encoded, to msgs: the encoded elements of a
// messages array, comma-separated.
func AppendMessage(msgs []byte, m Message) []byte {
	if len(msgs) > 0 {
		msgs = append(msgs, ',')
	}
	// An Encoder writes into msgs' own buffer: no copy of the encoding
	// but the one into it. It encodes exactly as json.Marshal does, then
	// a newline, cut off here.
	buf := bytes.NewBuffer(msgs)
	_ = json.NewEncoder(buf).Encode(m) // two strings: cannot fail
	out := buf.Bytes()
	return out[:len(out)-1]
}

// Prepare returns the request of one turn: msgs (built with AppendMessage)
// as its messages and maxTokens as its max_tokens.
func (t *Template) Prepare(msgs []byte, maxTokens int) *Prepared {
	body := make([]byte, 0, len(t.head)+len(msgs)+32)
	body = append(body, t.head...)
	if !t.fixedMax {
		body = strconv.AppendInt(body, int64(maxTokens), 10)
		body = append(body, `,"messages":[`...)
	}
	body = append(body, msgs...)
	body = append(body, "]}"...)
	p := t.proto
	p.body = body
	return &p
}
