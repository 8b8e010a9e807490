package supervise

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rehearse/rehearse/internal/endpoint"
	"github.com/rehearse/rehearse/internal/stream"
)

// Probe is the readiness sequence of one server: its health path answers
// 2xx, /v1/models answers 2xx, then one tiny request to Endpoint succeeds.
// In every mode, a /v1/models answer that is a model list must serve Model,
// when given (modelListed).
type Probe struct {
	// Name names the server in errors when there is no process (default
	// "server").
	Name       string
	BaseURL    string
	HealthPath string // default /health
	Endpoint   string // default /v1/chat/completions; "" with SkipRequest
	Model      string
	APIKey     string
	// Timeout bounds the whole sequence (default 10 min: GPU servers may
	// download weights or compile before they answer).
	Timeout time.Duration
	// Interval is the pause between attempts (default 200 ms).
	Interval time.Duration
	// SkipRequest leaves out the tiny request.
	SkipRequest bool
	// Mode is the readiness sequence: ReadyFull (the default: health path,
	// /v1/models, one tiny request), ReadyModels (GET /v1/models alone, for
	// hosted APIs with no health route) or ReadyAnswer (one HTTP answer of
	// any status from GET /v1/models or the health path: the server is
	// reached, and the waves' records say what it answers).
	Mode string
	// Prepare are run once the health path answers 2xx, one after
	// another, before the rest of the sequence (Process.Prepare); a launched
	// process only. One that fails ends the readiness.
	Prepare []Command
	// LogLines is how many last lines of the log a failure shows (default 20).
	LogLines int
	// Client makes the probes (default: a client with a 10 s timeout).
	Client *http.Client
}

// NotReadyError says why a server did not become ready, with the last lines
// of its log.
type NotReadyError struct {
	Server  string
	Reason  string
	LogPath string
	Tail    []string
	// Err is the final answer that ended the wait (a
	// *stream.ModelNotServedError, say); nil for a deadline or an exit.
	Err error
}

func (e *NotReadyError) Unwrap() error { return e.Err }

func (e *NotReadyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: not ready: %s", e.Server, e.Reason)
	if e.LogPath != "" {
		if len(e.Tail) == 0 {
			fmt.Fprintf(&b, " (%s is empty)", e.LogPath)
		} else {
			fmt.Fprintf(&b, "; last lines of %s:", e.LogPath)
			for _, l := range e.Tail {
				b.WriteString("\n    ")
				b.WriteString(l)
			}
		}
	}
	return b.String()
}

// WaitReady runs the readiness sequence against a launched process (p) or a
// server already running (p nil). It fails early when p exits.
func WaitReady(ctx context.Context, p *Process, pr Probe) error {
	pr = pr.withDefaults()
	client := pr.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	w := &readiness{p: p, name: pr.Name, timeout: pr.Timeout, interval: pr.Interval, logLines: pr.LogLines}
	if w.name == "" {
		w.name = "server"
	}
	if p != nil {
		w.name, w.logPath, w.done = p.Name(), p.LogPath(), p.Done()
	}
	pr.Name = w.name
	w.deadline = time.Now().Add(pr.Timeout)
	ctx, cancel := context.WithDeadline(ctx, w.deadline)
	defer cancel()

	steps, err := readySteps(pr, client, p)
	if err != nil {
		return w.fail(err.Error(), err)
	}
	for _, step := range steps {
		if err := w.retry(ctx, step); err != nil {
			return err
		}
	}
	return nil
}

// withDefaults is pr with its defaults where it leaves them unset: the
// health path, the endpoint, the timeout, the interval and the log
// lines shown.
func (pr Probe) withDefaults() Probe {
	if pr.HealthPath == "" {
		pr.HealthPath = "/health"
	}
	if pr.Endpoint == "" {
		pr.Endpoint = "/v1/chat/completions"
	}
	if pr.Timeout <= 0 {
		pr.Timeout = 10 * time.Minute
	}
	if pr.Interval <= 0 {
		pr.Interval = 200 * time.Millisecond
	}
	if pr.LogLines <= 0 {
		pr.LogLines = 20
	}
	return pr
}

// readiness is WaitReady's wait for one server: its name, its process
// (p, nil for a server already running) with its log and its end (done),
// and the probe's deadline, pause between attempts and log lines shown.
type readiness struct {
	p        *Process
	name     string
	logPath  string
	done     <-chan struct{}
	deadline time.Time
	timeout  time.Duration
	interval time.Duration
	logLines int
}

// fail is a *NotReadyError saying reason (err, where not nil, the answer
// that ended the wait), with the last lines of the log.
func (w *readiness) fail(reason string, err error) error {
	e := &NotReadyError{Server: w.name, Reason: reason, LogPath: w.logPath, Err: err}
	if w.logPath != "" {
		e.Tail, _ = TailLines(w.logPath, w.logLines)
	}
	return e
}

// retry tries step until it succeeds, the process exits, it fails for
// good (a fatalProbe) or ctx ends, pausing between attempts.
func (w *readiness) retry(ctx context.Context, step readyStep) error {
	var last error
	cut := false // the final attempt was still waiting at the deadline
	for {
		if w.done != nil {
			select {
			case <-w.done:
				e, _ := w.p.Exited()
				return w.fail(fmt.Sprintf("the process %s during %s", e.Phrase(), step.name), nil)
			default:
			}
		}
		err := step.try(ctx)
		if err == nil {
			return nil
		}
		// An attempt cut short by our own deadline says nothing about
		// the server; keep the last real answer for the message.
		cut = last != nil && ctx.Err() != nil
		if !cut {
			last = err
		}
		var fatal *fatalProbe
		if errors.As(err, &fatal) {
			return w.fail(fmt.Sprintf("%s: %v", step.name, fatal.err), fatal.err)
		}
		if err := w.pause(ctx, step, last, cut); err != nil {
			return err
		}
	}
}

// pause waits the interval before step's next attempt, or until the
// process exits. Where ctx ends first it is the error: no answer by the
// deadline (last the last answer; cut: the attempt after it was still
// waiting), or the readiness interrupted.
func (w *readiness) pause(ctx context.Context, step readyStep, last error, cut bool) error {
	wait := time.NewTimer(w.interval)
	select {
	case <-ctx.Done():
		wait.Stop()
		if errors.Is(context.Cause(ctx), context.DeadlineExceeded) && time.Now().After(w.deadline.Add(-time.Millisecond)) {
			reason := fmt.Sprintf("no answer within %s; last attempt %s: %v", w.timeout, step.name, last)
			if cut {
				reason = fmt.Sprintf("no answer within %s; %s last answered %v, and the attempt after it was still waiting at the deadline", w.timeout, step.name, last)
			}
			return w.fail(reason, nil)
		}
		return fmt.Errorf("%s: readiness interrupted: %w", w.name, context.Cause(ctx))
	case <-w.done:
		wait.Stop()
	case <-wait.C:
	}
	return nil
}

// readyStep is one step of the readiness sequence, retried until it
// succeeds, the deadline passes or it fails for good (a fatalProbe).
type readyStep struct {
	name string
	try  func(context.Context) error
}

// readySteps is the sequence pr asks for: the mode's steps, after the
// health path and the prepare commands when there are any, then the tiny
// request.
func readySteps(pr Probe, client *http.Client, p *Process) ([]readyStep, error) {
	health := readyStep{"GET " + pr.HealthPath, func(c context.Context) error { return get(c, client, pr.BaseURL+pr.HealthPath, pr.APIKey, nil) }}
	models := readyStep{"GET /v1/models", func(c context.Context) error { return checkModels(c, client, pr) }}
	var steps []readyStep
	switch pr.Mode {
	case ReadyModels:
		steps = []readyStep{models}
	case ReadyAnswer:
		steps = []readyStep{{"GET /v1/models or " + pr.HealthPath + " (any answer)", func(c context.Context) error { return answered(c, client, pr) }}}
	default:
		steps = []readyStep{health, models}
	}
	if len(pr.Prepare) > 0 {
		if p == nil {
			return nil, errors.New("prepare commands need a launched server")
		}
		first := []readyStep{health}
		for _, c := range pr.Prepare {
			shown := c.Shown
			if shown == nil {
				shown = c.Argv
			}
			first = append(first, readyStep{"prepare " + quoteArgv(shown), func(ctx context.Context) error {
				if err := p.Prepare(ctx, c); err != nil {
					return &fatalProbe{err}
				}
				return nil
			}})
		}
		if steps[0].name == health.name {
			steps = steps[1:]
		}
		steps = append(first, steps...)
	}
	if !pr.SkipRequest && (pr.Mode == "" || pr.Mode == ReadyFull) {
		steps = append(steps, readyStep{"POST " + pr.Endpoint + " (one tiny request)", func(c context.Context) error { return tinyRequest(c, client, pr) }})
	}
	return steps, nil
}

// Readiness modes (Probe.Mode).
const (
	ReadyFull   = "full"
	ReadyModels = "models"
	ReadyAnswer = "answer"
)

// answered succeeds when GET /v1/models, or else the health path, gets an
// HTTP answer of any status but 401 or 403 (a key refused, which retrying
// will not change); a model list that does not serve the probe's model
// fails it (modelListed).
func answered(ctx context.Context, client *http.Client, pr Probe) error {
	var err error
	for _, path := range []string{"/v1/models", pr.HealthPath} {
		var data []byte
		err = get(ctx, client, pr.BaseURL+path, pr.APIKey, &data)
		if err == nil && path == "/v1/models" {
			return modelListed(pr, data)
		}
		if _, status := errors.AsType[*HTTPStatusError](err); err == nil || status {
			return nil
		}
		if _, fatal := errors.AsType[*fatalProbe](err); fatal {
			return err
		}
	}
	return err
}

// HTTPStatusError is a probe answered with a status outside 2xx.
type HTTPStatusError struct{ Code int }

func (e *HTTPStatusError) Error() string { return fmt.Sprintf("HTTP %d", e.Code) }

// fatalProbe is a probe answer that retrying will not change.
type fatalProbe struct{ err error }

func (f *fatalProbe) Error() string { return f.err.Error() }

func get(ctx context.Context, client *http.Client, url, apiKey string, body *[]byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return &fatalProbe{err}
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return shortNetErr(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			return &fatalProbe{fmt.Errorf("HTTP %d (check api_key_env)", resp.StatusCode)}
		}
		return &HTTPStatusError{Code: resp.StatusCode}
	}
	if body != nil {
		*body = data
	}
	return nil
}

func checkModels(ctx context.Context, client *http.Client, pr Probe) error {
	var data []byte
	if err := get(ctx, client, pr.BaseURL+"/v1/models", pr.APIKey, &data); err != nil {
		if hs, ok := errors.AsType[*HTTPStatusError](err); ok && hs.Code == http.StatusNotFound {
			return &fatalProbe{errors.New("HTTP 404: the server has no OpenAI /v1/models route (is base_url the server's root, without /v1?)")}
		}
		return err
	}
	return modelListed(pr, data)
}

// CheckModel asks GET /v1/models once, within a few seconds, whether the
// server serves pr.Model (modelListed): a *stream.ModelNotServedError when
// its list does not, nil otherwise, also when it does not answer or answers
// no list (readiness asks again, and waits). For a server already running,
// before anything else is done.
func CheckModel(ctx context.Context, pr Probe) error {
	if pr.Model == "" {
		return nil
	}
	client := pr.Client
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	var data []byte
	if get(ctx, client, pr.BaseURL+"/v1/models", pr.APIKey, &data) != nil {
		return nil
	}
	if fatal, ok := errors.AsType[*fatalProbe](modelListed(pr, data)); ok {
		return fatal.err
	}
	return nil
}

// modelListed is readiness's check of the model against an answer of GET
// /v1/models (data, a 2xx), in every mode: nil when the probe names no
// model, when the answer is not a model list (a server without OpenAI's
// route: nothing to check it against), or when the list serves the model
// (stream.Serves, which takes NAME:latest for NAME); else a final
// *stream.ModelNotServedError, for the runner to refuse the rehearsal.
func modelListed(pr Probe, data []byte) error {
	if pr.Model == "" {
		return nil
	}
	models, err := stream.ParseModels(data)
	if err != nil {
		return nil
	}
	if err := stream.CheckServed(pr.Name, models, pr.Model); err != nil {
		return &fatalProbe{err}
	}
	return nil
}

// tinyRequest sends one request of the API the workload sends
// (stream.API of the endpoint) and checks that the answer is of that API:
// a 404, a 400 about the body's fields, or an answer of the other shape is
// an endpoint/API mismatch, said as such.
func tinyRequest(ctx context.Context, client *http.Client, pr Probe) error {
	body := map[string]any{"model": pr.Model, "max_tokens": 1, "temperature": 0, "stream": false}
	completions := endpoint.IsCompletions(pr.Endpoint)
	if completions {
		body["prompt"] = "Hi"
	} else {
		body["messages"] = []map[string]string{{"role": "user", "content": "Hi"}}
	}
	data, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, pr.BaseURL+pr.Endpoint, bytes.NewReader(data))
	if err != nil {
		return &fatalProbe{err}
	}
	req.Header.Set("Content-Type", "application/json")
	if pr.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+pr.APIKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return shortNetErr(err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := fmt.Errorf("HTTP %d", resp.StatusCode)
		if m := strings.TrimSpace(string(msg)); m != "" {
			err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, m)
		}
		if resp.StatusCode == http.StatusNotFound || (resp.StatusCode == http.StatusBadRequest && mentionsOtherAPI(msg, completions)) {
			err = fmt.Errorf("%w; %s", err, apiMismatch(pr.Endpoint, completions))
		}
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			return &fatalProbe{err}
		}
		return err
	}
	if shape := answerShape(msg); shape != "" && shape != endpoint.API(pr.Endpoint) {
		return &fatalProbe{fmt.Errorf("the answer is a %s response, not a %s one; %s", shape, endpoint.API(pr.Endpoint), apiMismatch(pr.Endpoint, completions))}
	}
	return nil
}

// apiMismatch says which API the workload sends to ep and what to
// use for the other one.
func apiMismatch(ep string, completions bool) string {
	if completions {
		return fmt.Sprintf("the workload sends the completions API (prompt) to %s (--backend openai or an ep ending in /completions): does the server serve it there? For chat use --backend openai-chat / ep %s", ep, endpoint.Default)
	}
	return fmt.Sprintf("the workload sends the chat API (messages) to %s (--backend openai-chat or any ep not ending in /completions): does the server serve it there? For a completions server use --backend openai / ep %s", ep, endpoint.Completions)
}

// mentionsOtherAPI reports whether a 400's body complains about the field
// the other API has or this one lacks (prompt for chat, messages for
// completions).
func mentionsOtherAPI(msg []byte, completions bool) bool {
	m := strings.ToLower(string(msg))
	if completions {
		return strings.Contains(m, "messages")
	}
	return strings.Contains(m, "prompt") && !strings.Contains(m, "prompt_tokens")
}

// answerShape is the API a non-streaming answer is of: "chat" (choices
// with a message), "completions" (choices with text), or "" when it
// cannot tell.
func answerShape(body []byte) string {
	var a struct {
		Object  string `json:"object"`
		Choices []struct {
			Message json.RawMessage `json:"message"`
			Text    *string         `json:"text"`
		} `json:"choices"`
	}
	if json.Unmarshal(body, &a) != nil || len(a.Choices) == 0 {
		return ""
	}
	switch c := a.Choices[0]; {
	case c.Message != nil && c.Text == nil:
		return "chat"
	case c.Text != nil && c.Message == nil:
		return "completions"
	}
	return ""
}

func shortNetErr(err error) error {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && strings.Contains(s, "dial tcp") {
		s = s[i+2:]
	}
	return errors.New(s)
}

// TailLines returns the last n lines of the file at path.
func TailLines(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	const chunk = 64 << 10
	off := max(st.Size()-chunk, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if off > 0 && len(lines) > 1 {
		lines = lines[1:] // the first may be cut
	}
	var out []string
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out, nil
}
