package tokenizer

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// Tokenizer encodes text to token ids and back. After loading only its
// caches change (atomically); it is safe for concurrent use by many
// goroutines.
type Tokenizer struct {
	info  Info
	nfc   bool
	split splitKind
	model *bpe

	// vocab maps the raw bytes of each token to its id. A piece found here is
	// that one token when merges reach it (learnt on first use, in reach) or
	// when ignore_merges says so; other pieces are merged.
	vocab        map[string]int
	reach        []atomic.Uint32 // by id: 0 not yet known, reachNo, reachYes
	ignoreMerges bool

	cache    pieceCache
	added    addedMatcher
	idBytes  [][]byte // what each id decodes to; nil for unused ids
	vocabLen int
}

// Info says which tokenizer file counted, for provenance.
type Info struct {
	Name        string `json:"name"`         // "qwen3", "qwen2.5" or the file's path
	SHA256      string `json:"sha256"`       // of the tokenizer.json bytes read
	Source      string `json:"source"`       // "embedded" or the path read
	AddedTokens int    `json:"added_tokens"` // added tokens in use (Qwen2.5 drops four)
}

// Parse builds a Tokenizer from a tokenizer.json's bytes. It refuses, with
// an error naming the field, any component it does not implement.
func Parse(data []byte) (*Tokenizer, error) {
	return parse(data, nil)
}

// Load reads and parses a tokenizer.json; errors name the file. A test
// helper: the binary finds and opens a tokenizer through Resolve.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := parse(data, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t.info.Name = path
	t.info.Source = path
	return t, nil
}

// parse builds a Tokenizer, leaving out the added tokens named in drop.
func parse(data []byte, drop map[string]bool) (*Tokenizer, error) {
	c, err := parseConfig(data)
	if err != nil {
		return nil, err
	}
	return c.build(drop), nil
}

// build makes a Tokenizer of a validated config, leaving out the added
// tokens named in drop. Tokenizers built from one config share its model.
func (c *config) build(drop map[string]bool) *Tokenizer {
	t := &Tokenizer{
		info:  Info{SHA256: c.sha256},
		nfc:   c.nfc,
		split: c.split,
		model: c.model,
	}
	top := -1
	for _, id := range c.vocab {
		top = max(top, id)
	}
	var added []addedTokenJSON
	for _, a := range c.addedTokens {
		if drop[a.Content] {
			continue
		}
		added = append(added, a)
		top = max(top, a.ID)
	}
	t.vocabLen = top + 1
	t.idBytes = make([][]byte, t.vocabLen)
	for b, id := range c.vocab {
		t.idBytes[id] = []byte(b)
	}
	for _, a := range added {
		t.idBytes[a.ID] = addedTokenBytes(a.Content)
	}
	t.info.AddedTokens = len(added)
	t.added = newAddedMatcher(added, c.nfc)
	t.vocab = c.vocab
	t.ignoreMerges = c.ignoreMerges
	t.reach = make([]atomic.Uint32, t.vocabLen)
	t.cache.seed = maphash.MakeSeed()
	t.cache.slots = make([]atomic.Pointer[cacheEntry], cacheSlots)
	return t
}

// addedTokenBytes is what the ByteLevel decoder makes of an added token: its
// characters mapped back to bytes when all are in the ByteLevel alphabet,
// else its UTF-8 as written.
func addedTokenBytes(content string) []byte {
	if b, ok := byteLevelDecode(content); ok {
		return b
	}
	return []byte(content)
}

// Info describes the tokenizer file in use.
func (t *Tokenizer) Info() Info { return t.info }

// VocabSize is one more than the largest id, added tokens included.
func (t *Tokenizer) VocabSize() int { return t.vocabLen }

// TokenBytes returns (a copy of) the raw bytes token id stands for.
func (t *Tokenizer) TokenBytes(id int) ([]byte, bool) {
	b, ok := t.tokenBytes(id)
	return bytes.Clone(b), ok
}

func (t *Tokenizer) tokenBytes(id int) ([]byte, bool) {
	if id < 0 || id >= len(t.idBytes) || t.idBytes[id] == nil {
		return nil, false
	}
	return t.idBytes[id], true
}

// Encode returns the ids of text, adding no special tokens (the library's
// add_special_tokens=False). Invalid UTF-8 is read as U+FFFD per maximal
// invalid subpart, as a lossy conversion to a string would.
func (t *Tokenizer) Encode(text string) []int {
	return t.appendEncode(make([]int, 0, len(text)/3+1), text)
}

// Count returns the number of tokens of text, as len(Encode(text)).
func (t *Tokenizer) Count(text string) int {
	var buf [256]int
	return len(t.appendEncode(buf[:0], text))
}

// AppendEncode appends the ids of text to dst.
func (t *Tokenizer) AppendEncode(dst []int, text string) []int {
	return t.appendEncode(dst, text)
}

func (t *Tokenizer) appendEncode(dst []int, text string) []int {
	if !utf8.ValidString(text) {
		text = string(appendLossy(nil, []byte(text)))
	}
	return t.added.each(text, dst, t.encodeSegment, t.normalize)
}

func (t *Tokenizer) normalize(s string) string {
	if t.nfc {
		return nfc(s)
	}
	return s
}

// encodeSegment encodes normalized text that holds no added token.
func (t *Tokenizer) encodeSegment(dst []int, s string) []int {
	for i := 0; i < len(s); {
		j := t.split.next(s, i)
		dst = t.encodePiece(dst, s[i:j])
		i = j
	}
	return dst
}

const (
	reachNo  = 1
	reachYes = 2
)

// encodePiece appends the ids of one pre-tokenizer piece, from the cache
// when the piece was seen before.
func (t *Tokenizer) encodePiece(dst []int, piece string) []int {
	if len(piece) > maxCachedPiece || t.cache.slots == nil {
		return t.encodeUncached(dst, piece)
	}
	// Two ways, side by side in one cache line: slot h and h^1.
	h := maphash.String(t.cache.seed, piece)
	i := h & (cacheSlots - 1)
	for _, k := range [2]uint64{i, i ^ 1} {
		if e := t.cache.slots[k].Load(); e != nil && e.piece == piece {
			if e.ids == nil {
				return append(dst, int(e.id))
			}
			for _, id := range e.ids {
				dst = append(dst, int(id))
			}
			return dst
		}
	}
	// Fill an empty way, else replace one chosen by another hash bit.
	slot := &t.cache.slots[i]
	if slot.Load() != nil {
		if other := &t.cache.slots[i^1]; other.Load() == nil || h&cacheSlots != 0 {
			slot = other
		}
	}
	n := len(dst)
	dst = t.encodeUncached(dst, piece)
	e := &cacheEntry{piece: strings.Clone(piece)}
	if len(dst) == n+1 {
		e.id = int32(dst[n])
	} else {
		e.ids = make([]int32, len(dst)-n)
		for i, id := range dst[n:] {
			e.ids[i] = int32(id)
		}
	}
	slot.Store(e)
	return dst
}

// encodeUncached appends the ids of one piece: the vocabulary token it is
// when merges reach it whole, else the merges' result.
func (t *Tokenizer) encodeUncached(dst []int, piece string) []int {
	id, ok := t.vocab[piece]
	if !ok {
		return t.model.encode(dst, piece)
	}
	if t.ignoreMerges || len(piece) == 1 {
		return append(dst, id)
	}
	switch t.reach[id].Load() {
	case reachYes:
		return append(dst, id)
	case reachNo:
		return t.model.encode(dst, piece)
	}
	n := len(dst)
	dst = t.model.encode(dst, piece)
	if len(dst) == n+1 && dst[n] == id {
		t.reach[id].Store(reachYes)
	} else {
		t.reach[id].Store(reachNo)
	}
	return dst
}

// Decode turns ids back into text as the library's decode does without
// skipping special tokens: unknown ids are left out, and bytes that are not
// valid UTF-8 become U+FFFD per maximal invalid subpart.
func (t *Tokenizer) Decode(ids []int) string {
	var raw []byte
	for _, id := range ids {
		if b, ok := t.tokenBytes(id); ok {
			raw = append(raw, b...)
		}
	}
	if utf8.Valid(raw) {
		return string(raw)
	}
	return string(appendLossy(nil, raw))
}

// AddedTokens lists the added tokens in use, by id.
func (t *Tokenizer) AddedTokens() []string {
	toks := append([]addedToken(nil), t.added.tokens...)
	sort.Slice(toks, func(i, j int) bool { return toks[i].id < toks[j].id })
	out := make([]string, len(toks))
	for i, a := range toks {
		out[i] = a.content
	}
	return out
}

// pieceCache remembers the ids of recent pieces, as the library's BPE
// cache does: text repeats its words. It is two-way set-associative (a new
// piece replaces one of two), bounded, and safe for concurrent use:
// entries are immutable and slots are swapped atomically.
type pieceCache struct {
	seed  maphash.Seed
	slots []atomic.Pointer[cacheEntry]
}

type cacheEntry struct {
	piece string
	id    int32   // the piece's one id, when ids is nil
	ids   []int32 // its ids, when more than one
}

const (
	cacheSlots     = 1 << 17
	maxCachedPiece = 256
)
