package engine

import (
	"container/list"
	"encoding/binary"
	"sync/atomic"
)

// BlockTokens is the size of one KV-cache block in tokens, vLLM's default
// --block-size. The prefix cache keeps and matches whole blocks only.
const BlockTokens = 16

// Encoder turns text into token ids; the prefix cache hashes them. A
// Counter that also encodes (as *tokenizer.Tokenizer does) must count
// len(Encode(text)) tokens.
type Encoder interface {
	Encode(text string) []int
}

// BlockHashes is the hash chain of the full blocks of a prompt's token ids,
// as vLLM's prefix cache keys them: block i's hash covers its own tokens and
// the hash of block i-1, so equal hashes mean equal prefixes up to that
// block's end. A trailing partial block has no hash.
func BlockHashes(ids []int) []uint64 {
	n := len(ids) / BlockTokens
	if n == 0 {
		return nil
	}
	out := make([]uint64, n)
	var parent uint64
	var buf [8 + 4*BlockTokens]byte
	for b := range n {
		binary.LittleEndian.PutUint64(buf[:8], parent)
		for i, id := range ids[b*BlockTokens : (b+1)*BlockTokens] {
			binary.LittleEndian.PutUint32(buf[8+4*i:], uint32(id))
		}
		parent = fnv1a(buf[:])
		out[b] = parent
	}
	return out
}

// fnv1a is the 64-bit FNV-1a hash of b (hash/fnv's, without an allocation).
func fnv1a(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// PrefixCache holds the hashes of KV blocks computed recently, up to
// capBlocks of them, evicting the least recently used, as vLLM's automatic
// prefix caching keeps freed blocks reusable until their memory is needed.
// It is owned by the engine goroutine; the counters are read by /metrics.
//
// The model's simplifications: the cache is bounded by the KV budget on its
// own (the blocks of running sequences are not subtracted), and admission
// still reserves a sequence's whole prompt in the KV budget, as if shared
// blocks were not shared.
type PrefixCache struct {
	capBlocks int
	lru       *list.List // of uint64, most recently used first
	index     map[uint64]*list.Element

	// queries counts the prompt tokens of every request looked up, and hits
	// those found cached, once per request (at its first admission), as
	// vLLM's vllm:prefix_cache_queries and vllm:prefix_cache_hits do.
	queries, hits atomic.Int64
}

// NewPrefixCache makes an empty prefix cache of at most kvBudgetTokens
// tokens of whole blocks.
func NewPrefixCache(kvBudgetTokens int) *PrefixCache {
	return &PrefixCache{capBlocks: max(1, kvBudgetTokens/BlockTokens), lru: list.New(), index: map[uint64]*list.Element{}}
}

// match returns how many leading prompt tokens of a sequence are cached:
// whole blocks, and at most promptTokens-1 (vLLM always computes the last
// prompt token, whose logits give the first output token). Matched blocks
// become the most recently used.
func (c *PrefixCache) match(blocks []uint64, promptTokens int) int {
	limit := min(len(blocks), (promptTokens-1)/BlockTokens)
	n := 0
	for n < limit {
		if _, ok := c.index[blocks[n]]; !ok {
			break
		}
		n++
	}
	c.touch(blocks[:n])
	return n * BlockTokens
}

// insert caches a sequence's computed prompt blocks.
func (c *PrefixCache) insert(blocks []uint64) {
	c.touch(blocks)
	for c.lru.Len() > c.capBlocks {
		last := c.lru.Back()
		delete(c.index, last.Value.(uint64))
		c.lru.Remove(last)
	}
}

// touch makes blocks the most recently used, the first block most recent of
// all, so that eviction takes a chain's tail before its head (as vLLM frees a
// request's blocks in reverse order): a cached block's parents stay cached.
func (c *PrefixCache) touch(blocks []uint64) {
	for i := len(blocks) - 1; i >= 0; i-- {
		if el, ok := c.index[blocks[i]]; ok {
			c.lru.MoveToFront(el)
		} else {
			c.index[blocks[i]] = c.lru.PushFront(blocks[i])
		}
	}
}
