package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// Prompt is what one request sends: one user message and, where the source
// sets it, the request's own output limit.
type Prompt struct {
	Text string `json:"text"`
	// MaxTokens is this request's max_tokens; 0 means the workload's.
	MaxTokens int `json:"max_tokens,omitempty"`
	// Messages, when set, are the whole conversation sent (Text is then
	// its last user message).
	Messages []Message `json:"messages,omitempty"`
}

// Message is one chat message of a prompt.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Spec names a prompt source and its parameters, as the rehearsal file (or
// bench's flags) gives them. Only the fields of the named source are read.
type Spec struct {
	// Source is a name in Sources(); "" is inferred: inline when Inline is
	// set, file when Path is, else builtin.
	Source string
	// Inline are the prompts of the inline source.
	Inline []string
	// Path is the file of a file-backed source.
	Path string
	// Synthetic are the parameters of the synthetic source.
	Synthetic *Synthetic
	// Dataset are the parameters of the sharegpt and chat_jsonl sources.
	Dataset *Dataset
	// Trace are the parameters of the trace source.
	Trace *Trace
	// Prefix are the parameters of the prefix_repetition source.
	Prefix *PrefixRepetition
	// Sessions, when set, asks the source for multi-turn sessions (one of
	// SessionSources).
	Sessions *Sessions
}

// Name is the source Spec resolves with.
func (s Spec) Name() string {
	switch {
	case s.Source != "":
		return s.Source
	case s.Inline != nil:
		return SourceInline
	case s.Path != "":
		return SourceFile
	}
	return SourceBuiltin
}

// Encoder is what a source needs of the pinned tokenizer to build prompts
// of exact token lengths; *tokenizer.Tokenizer satisfies it.
type Encoder interface {
	Count(text string) int
	TokenBytes(id int) ([]byte, bool)
	VocabSize() int
}

// Env is what a source may use beyond its Spec.
type Env struct {
	// Tokenizer is the pinned tokenizer (nil where none counts text).
	Tokenizer Encoder
	// MaxModelLen, when positive, is the smallest max_model_len of the
	// servers: it bounds every length a source reads or draws in place of
	// MaxSourceTokens, checked before anything is built for it.
	MaxModelLen int
}

// Set is a resolved source: its prompts, in the order requests take them,
// and the record of where they came from.
type Set struct {
	Prompts []Prompt
	Record  SourceRecord
	// IgnoreEOS asks every request to generate all its max_tokens
	// (ignore_eos: true in the body), as the source asked.
	IgnoreEOS bool
	// Arrivals, where the source times its requests (a trace), is when
	// request i is sent, as an offset from the wave's release, aligned
	// with Prompts and never decreasing; nil otherwise.
	Arrivals []time.Duration
	// Sessions are the multi-turn sessions where the Spec asked for them:
	// each a list of user turns, indices into Prompts (every prompt is one
	// session's turn).
	Sessions []Session
}

// SourceRecord says where a Set came from, for the bundle's workload.
type SourceRecord struct {
	// Name is the source's name in Sources().
	Name string
	// Params are the source's parameters (path, lengths, seed, …).
	Params map[string]any
	// SHA256 is the digest of the source file where there is one, else of
	// the resolved prompts as JSON (PromptsSHA256).
	SHA256 string
	// Skipped counts the dataset entries left out, by reason.
	Skipped map[string]int
}

// Texts returns the prompts' user messages.
func (s Set) Texts() []string {
	out := make([]string, len(s.Prompts))
	for i, p := range s.Prompts {
		out[i] = p.Text
	}
	return out
}

// MaxTokens returns each prompt's own max_tokens, or nil when no prompt
// sets one (every request takes the workload's).
func (s Set) MaxTokens() []int {
	var out []int
	for i, p := range s.Prompts {
		if p.MaxTokens != 0 && out == nil {
			out = make([]int, len(s.Prompts))
		}
		if out != nil {
			out[i] = p.MaxTokens
		}
	}
	return out
}

// Messages returns each prompt's messages, or nil when no prompt has any
// (every request sends its text as one user message).
func (s Set) Messages() [][]Message {
	var out [][]Message
	for i, p := range s.Prompts {
		if p.Messages != nil && out == nil {
			out = make([][]Message, len(s.Prompts))
		}
		if out != nil {
			out[i] = p.Messages
		}
	}
	return out
}

// Texts is a Set of the given prompts under the inline source. A test
// helper, for tests that hold the prompts already: the binary resolves
// prompts through a Spec.
func Texts(prompts ...string) Set {
	set, _ := resolveInline(Spec{Inline: prompts}, Env{})
	return set
}

// SourceFunc resolves one source.
type SourceFunc func(spec Spec, env Env) (Set, error)

// Source names.
const (
	SourceBuiltin   = "builtin"
	SourceInline    = "inline"
	SourceFile      = "file"
	SourceSynthetic = "synthetic"
)

// sources is the registration seam: a source is a file and a line here.
var sources = map[string]SourceFunc{
	SourceBuiltin:   resolveBuiltin,
	SourceInline:    resolveInline,
	SourceFile:      resolveFile,
	SourceSynthetic: resolveSynthetic,
	SourceShareGPT:  resolveShareGPT,
	SourceChatJSONL: resolveChatJSONL,

	SourcePrefixRepetition: resolvePrefixRepetition,
	SourceTrace:            resolveTrace,
}

// Sources lists the registered source names, sorted.
func Sources() []string {
	out := make([]string, 0, len(sources))
	for k := range sources {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Resolve resolves spec once: the ordered prompts every wave assigns
// round-robin, and their record. An empty result is an error.
func Resolve(spec Spec, env Env) (Set, error) {
	name := spec.Name()
	f, ok := sources[name]
	if !ok {
		return Set{}, fmt.Errorf("prompt source %q: want one of %s", name, strings.Join(Sources(), ", "))
	}
	if spec.Sessions != nil && !slices.Contains(SessionSources, name) {
		return Set{}, fmt.Errorf("prompt source %s has no conversations: multi-turn sessions come from %s", name, strings.Join(SessionSources, ", "))
	}
	set, err := f(spec, env)
	if err != nil {
		return Set{}, err
	}
	if len(set.Prompts) == 0 {
		return Set{}, fmt.Errorf("prompt source %s: no prompts", name)
	}
	set.Record.Name = name
	if set.Record.SHA256 == "" {
		set.Record.SHA256 = PromptsSHA256(set.Prompts)
	}
	return set, nil
}

// PromptsSHA256 is the hex SHA-256 of the prompts encoded as a JSON list of
// {text, max_tokens} objects.
func PromptsSHA256(ps []Prompt) string {
	data, _ := json.Marshal(ps)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func textPrompts(texts []string) []Prompt {
	out := make([]Prompt, len(texts))
	for i, t := range texts {
		out[i] = Prompt{Text: t}
	}
	return out
}

func resolveBuiltin(Spec, Env) (Set, error) {
	return Set{Prompts: textPrompts(builtin)}, nil
}

func resolveInline(spec Spec, _ Env) (Set, error) {
	return Set{Prompts: textPrompts(spec.Inline)}, nil
}

func resolveFile(spec Spec, _ Env) (Set, error) {
	texts, err := LoadPrompts(spec.Path)
	if err != nil {
		return Set{}, err
	}
	digest, err := fileSHA256(spec.Path)
	if err != nil {
		return Set{}, err
	}
	return Set{Prompts: textPrompts(texts), Record: SourceRecord{Params: map[string]any{"path": spec.Path}, SHA256: digest}}, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("prompts: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("prompts: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// digestReader hashes what is read through it.
type digestReader struct {
	r io.Reader
	h hash.Hash
}

func newDigestReader(r io.Reader) *digestReader { return &digestReader{r: r, h: sha256.New()} }

func (d *digestReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	d.h.Write(p[:n])
	return n, err
}

func (d *digestReader) sum() string { return hex.EncodeToString(d.h.Sum(nil)) }
