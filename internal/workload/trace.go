package workload

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SourceTrace replays a request trace: each line is one request, sent at
// its traced time, with a prompt of exactly its traced input length and
// its traced output length as max_tokens.
const SourceTrace = "trace"

// Trace formats.
const (
	// TraceMooncake is Mooncake's JSONL: {"timestamp": ms, "input_length":
	// n, "output_length": m, "hash_ids": [...]} per line, hash_ids naming
	// the prompt's blocks of BlockSize tokens (equal ids, equal blocks).
	TraceMooncake = "mooncake"
	// TraceAzure is the Azure LLM inference trace's CSV, with the header
	// TIMESTAMP,ContextTokens,GeneratedTokens and TIMESTAMP a datetime
	// ("2023-11-16 18:15:46.6805900", or with an offset such as +00:00).
	TraceAzure = "azure"
)

// TraceFormats lists the trace formats.
var TraceFormats = []string{TraceMooncake, TraceAzure}

// DefaultTraceBlockSize is the tokens of one Mooncake hash block.
const DefaultTraceBlockSize = 512

// Trace are the parameters of the trace source.
type Trace struct {
	// Format is TraceMooncake or TraceAzure; "" infers it from the file's
	// extension (.jsonl mooncake, .csv azure).
	Format string
	// TimeScale multiplies every arrival offset (0 means 1): 0.5 replays
	// the trace twice as fast, 2 half as fast.
	TimeScale float64
	// BlockSize is the tokens of one hash block (0 means 512).
	BlockSize int
	// Count, when positive, keeps the first Count lines (the whole file
	// is still checked).
	Count int
	// Seed draws the words of the blocks and of each prompt's remainder.
	Seed int64
	// IgnoreEOS asks the server to generate all max_tokens.
	IgnoreEOS bool
}

// Check says what is wrong with tr, one problem per element, each
// prefixed with the field it concerns.
func (tr Trace) Check() []string {
	var out []string
	if tr.Format != "" && !slices.Contains(TraceFormats, tr.Format) {
		out = append(out, fmt.Sprintf("format: %q: want one of %s", tr.Format, strings.Join(TraceFormats, ", ")))
	}
	if tr.TimeScale < 0 || math.IsNaN(tr.TimeScale) || math.IsInf(tr.TimeScale, 0) {
		out = append(out, fmt.Sprintf("time_scale: %v: want a positive number (0: 1)", tr.TimeScale))
	}
	if tr.BlockSize < 0 {
		out = append(out, fmt.Sprintf("block_size: %d: want a positive number of tokens (0: %d)", tr.BlockSize, DefaultTraceBlockSize))
	}
	if tr.Count < 0 {
		out = append(out, fmt.Sprintf("count: %d: must be 0 (all) or more", tr.Count))
	}
	return out
}

// TraceFormat is the format of the trace at path: format when given, else
// the one its extension names.
func TraceFormat(format, path string) (string, error) {
	if format != "" {
		return format, nil
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl":
		return TraceMooncake, nil
	case ".csv":
		return TraceAzure, nil
	}
	return "", fmt.Errorf("%s: give the trace's format (%s): its extension names none (.jsonl is mooncake, .csv azure)", path, strings.Join(TraceFormats, ", "))
}

// traceLine is one request of a trace.
type traceLine struct {
	line          int     // 1-based line of the file
	atMS          float64 // timestamp in milliseconds, on the trace's own clock
	raw           string  // the timestamp as written, where it is not atMS
	input, output int
	hashIDs       []int
}

func resolveTrace(spec Spec, env Env) (Set, error) {
	tr := Trace{}
	if spec.Trace != nil {
		tr = *spec.Trace
	}
	if probs := tr.Check(); len(probs) > 0 {
		return Set{}, fmt.Errorf("trace: %s", strings.Join(probs, "; "))
	}
	if env.Tokenizer == nil {
		return Set{}, errors.New("trace prompts need the pinned tokenizer to count their lengths (tokenizer variant \"usage\" counts none)")
	}
	format, err := TraceFormat(tr.Format, spec.Path)
	if err != nil {
		return Set{}, err
	}
	scale, bs := tr.TimeScale, tr.BlockSize
	if scale == 0 {
		scale = 1
	}
	if bs == 0 {
		bs = DefaultTraceBlockSize
	}
	pool, err := wordPool(env.Tokenizer)
	if err != nil {
		return Set{}, err
	}
	f, err := os.Open(spec.Path)
	if err != nil {
		return Set{}, fmt.Errorf("prompts: %w", err)
	}
	defer f.Close()
	digest := newDigestReader(f)
	c := traceSet{path: spec.Path, count: tr.Count, scale: scale,
		b: traceBuilder{enc: env.Tokenizer, pool: pool, blockSize: bs, seed: tr.Seed, blocks: map[int]string{}}}
	switch format {
	case TraceMooncake:
		err = readMooncake(digest, spec.Path, env.tokenBound(), c.add)
	case TraceAzure:
		err = readAzure(digest, spec.Path, env.tokenBound(), c.add)
	}
	if err != nil {
		return Set{}, err
	}
	if c.n == 0 {
		return Set{}, fmt.Errorf("%s: an empty trace (no requests)", spec.Path)
	}
	if _, err := io.Copy(io.Discard, digest); err != nil {
		return Set{}, fmt.Errorf("prompts: %w", err)
	}
	params := map[string]any{
		"path": spec.Path, "format": format, "time_scale": scale, "block_size": bs,
		"count": tr.Count, "seed": tr.Seed, "ignore_eos": tr.IgnoreEOS, "lines": c.n,
	}
	if c.outZero > 0 {
		// max_tokens 0 means the workload's; a traced 0 is sent as 1.
		params["output_length_0_sent_as_1"] = c.outZero
	}
	set := c.set
	set.Record = SourceRecord{Params: params, SHA256: digest.sum()}
	set.IgnoreEOS = tr.IgnoreEOS
	return set, nil
}

// traceSet gathers a trace's lines, in order, into a Set.
type traceSet struct {
	path    string
	count   int     // lines kept (0: all)
	scale   float64 // the time scale
	b       traceBuilder
	set     Set
	first   float64 // the first line's timestamp, ms
	last    traceLine
	n       int // lines read
	outZero int // lines of output length 0
}

// maxArrivalNS bounds a traced arrival, in nanoseconds after the first
// line: 2^63, past the latest a time.Duration holds (about 292 years).
const maxArrivalNS = float64(math.MaxInt64)

// add checks line l against the lines before it and, within the count,
// builds its prompt and its arrival.
func (c *traceSet) add(l traceLine) error {
	if c.n > 0 && l.atMS < c.last.atMS {
		return fmt.Errorf("%s:%d: timestamp %s is before %s of line %d: a trace's timestamps must not go backwards", c.path, l.line, l.stamp(), c.last.stamp(), c.last.line)
	}
	if c.n == 0 {
		c.first = l.atMS
	}
	at := (l.atMS - c.first) * c.scale * float64(time.Millisecond)
	if at >= maxArrivalNS {
		return fmt.Errorf("%s:%d: timestamp %s: %g ms after the first line's (time scale %g): past the 292 years an arrival may be", c.path, l.line, l.stamp(), l.atMS-c.first, c.scale)
	}
	c.last = l
	c.n++
	if c.count > 0 && len(c.set.Prompts) >= c.count {
		return nil
	}
	text, err := c.b.prompt(l)
	if err != nil {
		return fmt.Errorf("%s:%d: %v", c.path, l.line, err)
	}
	if l.output == 0 {
		c.outZero++
	}
	c.set.Prompts = append(c.set.Prompts, Prompt{Text: text, MaxTokens: max(1, l.output)})
	c.set.Arrivals = append(c.set.Arrivals, time.Duration(math.Round(at)))
	return nil
}

// stamp is the line's timestamp as the trace writes it.
func (l traceLine) stamp() string {
	if l.raw != "" {
		return strconv.Quote(l.raw)
	}
	return strconv.FormatFloat(l.atMS, 'g', -1, 64)
}

// readMooncake streams a Mooncake JSONL trace, a line of at most
// MaxLineBytes at a time, each line's lengths within bound.
func readMooncake(r io.Reader, path string, bound tokenBound, each func(traceLine) error) error {
	lr := newLineReader(r, MaxLineBytes)
	for {
		line, no, err := lr.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %v", path, no, err)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var e struct {
			Timestamp    *float64 `json:"timestamp"`
			InputLength  *int     `json:"input_length"`
			OutputLength *int     `json:"output_length"`
			HashIDs      []int    `json:"hash_ids"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				return fmt.Errorf("%s:%d: %s: want %s, got a JSON %s", path, no, te.Field, te.Type, te.Value)
			}
			return fmt.Errorf("%s:%d: not a JSON object of timestamp, input_length, output_length, hash_ids: %v", path, no, err)
		}
		switch {
		case e.Timestamp == nil:
			return fmt.Errorf("%s:%d: timestamp: missing", path, no)
		case e.InputLength == nil:
			return fmt.Errorf("%s:%d: input_length: missing", path, no)
		case e.OutputLength == nil:
			return fmt.Errorf("%s:%d: output_length: missing", path, no)
		}
		l := traceLine{line: no, atMS: *e.Timestamp, input: *e.InputLength, output: *e.OutputLength, hashIDs: e.HashIDs}
		if err := checkLine(l, bound, "timestamp", "input_length", "output_length"); err != nil {
			return fmt.Errorf("%s:%d: %v", path, no, err)
		}
		if err := each(l); err != nil {
			return err
		}
	}
}

// Azure trace columns.
const (
	azureTime   = "TIMESTAMP"
	azureInput  = "ContextTokens"
	azureOutput = "GeneratedTokens"
)

// azureLayouts are the TIMESTAMP forms of the Azure traces: 2023's
// "2023-11-16 18:15:46.6805900" and 2024's "2024-05-10 00:00:00.009930+00:00".
var azureLayouts = []string{"2006-01-02 15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", time.RFC3339Nano}

// readAzure streams an Azure LLM inference trace CSV, a record (a line of
// at most MaxLineBytes) at a time, each line's lengths within bound.
func readAzure(r io.Reader, path string, bound tokenBound, each func(traceLine) error) error {
	cr := csv.NewReader(newBoundedLines(bufio.NewReaderSize(r, 1<<20), MaxLineBytes))
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	head, err := cr.Read()
	if err == io.EOF {
		return fmt.Errorf("%s: an empty trace (no header, no requests)", path)
	}
	if err != nil {
		return csvError(path, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	for _, want := range []string{azureTime, azureInput, azureOutput} {
		if _, ok := col[want]; !ok {
			return fmt.Errorf("%s:1: the header lacks the %s column (want %s,%s,%s)", path, want, azureTime, azureInput, azureOutput)
		}
	}
	width := len(head)
	var t0 time.Time // the first line's time: offsets from it are exact
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return csvError(path, err)
		}
		no, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) != width {
			return fmt.Errorf("%s:%d: %d fields, want the header's %d", path, no, len(rec), width)
		}
		ts := strings.TrimSpace(rec[col[azureTime]])
		l := traceLine{line: no, raw: ts}
		at, ok := parseAzureTime(ts)
		if !ok {
			return fmt.Errorf("%s:%d: %s: %q is not a datetime such as 2023-11-16 18:15:46.6805900", path, no, azureTime, ts)
		}
		if t0.IsZero() {
			t0 = at
		}
		l.atMS = float64(at.Sub(t0).Nanoseconds()) / 1e6
		for _, c := range []struct {
			name string
			to   *int
		}{{azureInput, &l.input}, {azureOutput, &l.output}} {
			v := strings.TrimSpace(rec[col[c.name]])
			x, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%s:%d: %s: %q is not a whole number", path, no, c.name, v)
			}
			*c.to = x
		}
		if err := checkLine(l, bound, azureTime, azureInput, azureOutput); err != nil {
			return fmt.Errorf("%s:%d: %v", path, no, err)
		}
		if err := each(l); err != nil {
			return err
		}
	}
}

// csvError is a CSV reader's error, naming the line where it knows it.
func csvError(path string, err error) error {
	if tl := (*LineTooLongError)(nil); errors.As(err, &tl) {
		return fmt.Errorf("%s:%d: %v", path, tl.Line, err)
	}
	return fmt.Errorf("%s: %v", path, err)
}

// parseAzureTime parses a TIMESTAMP.
func parseAzureTime(s string) (time.Time, bool) {
	for _, layout := range azureLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// checkLine refuses a line's impossible values, and lengths past bound
// (an output of 0 is sent as 1), naming the field.
func checkLine(l traceLine, bound tokenBound, timeField, inField, outField string) error {
	switch {
	case math.IsNaN(l.atMS) || math.IsInf(l.atMS, 0):
		return fmt.Errorf("%s: %v is not a time", timeField, l.atMS)
	case l.input < 1:
		return fmt.Errorf("%s: %d: want at least 1 token", inField, l.input)
	case l.output < 0:
		return fmt.Errorf("%s: %d: want 0 or more tokens", outField, l.output)
	}
	if err := bound.check(inField, l.input); err != nil {
		return err
	}
	if err := bound.check(outField, l.output); err != nil {
		return err
	}
	if err := bound.checkSum(inField, l.input, outField, max(1, l.output)); err != nil {
		return err
	}
	for _, id := range l.hashIDs {
		if id < 0 {
			return fmt.Errorf("hash_ids: %d: want ids of 0 or more", id)
		}
	}
	return nil
}

// traceBuilder builds trace prompts of exact lengths. Block k of the hash
// ids is the same text wherever it appears: exactText of BlockSize words
// drawn from (Seed, k). A prompt is its blocks in order, cut at its input
// length, then a remainder drawn from (Seed, line) up to it.
type traceBuilder struct {
	enc       Encoder
	pool      []string
	blockSize int
	seed      int64
	b         strings.Builder
	// blocks caches block texts by id, up to maxCachedBlocks of them.
	blocks map[int]string
}

const maxCachedBlocks = 1 << 16

// Stream salts keep the block and the remainder generators apart.
const (
	blockStream     = 0x424c4f434b000000 // "BLOCK"
	remainderStream = 0x5245535400000000 // "REST"
)

func (t *traceBuilder) block(id int) (string, error) {
	if s, ok := t.blocks[id]; ok {
		return s, nil
	}
	rng := rand.New(rand.NewPCG(uint64(t.seed), blockStream^uint64(id)))
	s, err := exactText(&t.b, t.enc, t.pool, rng, t.blockSize)
	if err != nil {
		return "", fmt.Errorf("hash block %d: %w", id, err)
	}
	if len(t.blocks) < maxCachedBlocks {
		t.blocks[id] = s
	}
	return s, nil
}

// prompt is the text of line l: exactly l.input tokens, its first
// ⌊input/BlockSize⌋ blocks those of its hash ids (a last partial block is
// the first words of its block's text).
func (t *traceBuilder) prompt(l traceLine) (string, error) {
	var parts []string
	covered := 0
	for _, id := range l.hashIDs {
		if covered >= l.input {
			break
		}
		s, err := t.block(id)
		if err != nil {
			return "", err
		}
		if need := l.input - covered; need < t.blockSize {
			s = leadingWords(s, need)
			covered += need
		} else {
			covered += t.blockSize
		}
		parts = append(parts, s)
	}
	prefix := strings.Join(parts, " ")
	rest := l.input - covered
	if rest == 0 {
		if got := t.enc.Count(prefix); got != l.input {
			return "", fmt.Errorf("its hash blocks count %d tokens, want %d", got, l.input)
		}
		return prefix, nil
	}
	// The tokenizer splits at a space before a pool word, so counts add
	// up; the loop mends a join that does not.
	rng := rand.New(rand.NewPCG(uint64(t.seed), remainderStream^uint64(l.line)))
	for range 8 {
		tail, err := exactText(&t.b, t.enc, t.pool, rng, rest)
		if err != nil {
			return "", err
		}
		text := tail
		if prefix != "" {
			text = prefix + " " + tail
		}
		got := t.enc.Count(text)
		if got == l.input {
			return text, nil
		}
		rest += l.input - got
		if rest < 1 {
			break
		}
	}
	return "", fmt.Errorf("no text of exactly %d tokens found", l.input)
}

// leadingWords is the first n space-separated words of s.
func leadingWords(s string, n int) string {
	i := 0
	for ; n > 0 && i < len(s); n-- {
		j := strings.IndexByte(s[i:], ' ')
		if j < 0 {
			return s
		}
		i += j + 1
	}
	return s[:max(0, i-1)]
}
