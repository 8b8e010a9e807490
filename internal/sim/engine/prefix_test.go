package engine

import (
	"hash/fnv"
	"slices"
	"testing"
)

func seqIDs(from, n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = from + i
	}
	return ids
}

func TestFNV1aIsHashFNVs(t *testing.T) {
	for _, in := range []string{"", "a", "the lighthouse keeper"} {
		h := fnv.New64a()
		h.Write([]byte(in))
		if got, want := fnv1a([]byte(in)), h.Sum64(); got != want {
			t.Errorf("fnv1a(%q) = %x, want %x", in, got, want)
		}
	}
}

func TestBlockHashesChainWholeBlocks(t *testing.T) {
	a := BlockHashes(seqIDs(0, 50)) // 3 whole blocks, 2 tokens over
	if len(a) != 3 {
		t.Fatalf("50 tokens: %d block hashes, want 3", len(a))
	}
	if b := BlockHashes(seqIDs(0, 15)); b != nil {
		t.Errorf("15 tokens: %d block hashes, want none (no whole block)", len(b))
	}
	// The same leading blocks hash the same whatever follows them.
	b := BlockHashes(append(seqIDs(0, 32), seqIDs(1000, 16)...))
	if !slices.Equal(a[:2], b[:2]) || a[2] == b[2] {
		t.Errorf("shared 32-token prefix: hashes %x and %x, want the first two equal and the third not", a, b)
	}
	// A block's hash covers every block before it: one token changed in
	// block 0 changes the whole chain, though blocks 1 and 2 are equal.
	ids := seqIDs(0, 48)
	ids[3] = 999
	c := BlockHashes(ids)
	for i := range c {
		if c[i] == a[i] {
			t.Errorf("block %d hashes equal after block 0 changed", i)
		}
	}
}

func TestPrefixCacheMatchesAndEvictsLeastRecentlyUsed(t *testing.T) {
	c := NewPrefixCache(4 * BlockTokens) // four blocks
	x := BlockHashes(seqIDs(0, 48))      // chain x0 x1 x2
	if got := c.match(x, 48); got != 0 {
		t.Errorf("empty cache: %d tokens matched, want 0", got)
	}
	c.insert(x)
	// A prompt of exactly 48 tokens matches 32: the last token is always
	// computed, so the third block is not skipped.
	if got := c.match(x, 48); got != 32 {
		t.Errorf("48-token prompt, 3 cached blocks: %d tokens matched, want 32", got)
	}
	if got := c.match(x, 49); got != 48 {
		t.Errorf("49-token prompt, 3 cached blocks: %d tokens matched, want 48", got)
	}
	if got := c.match(x, 1); got != 0 {
		t.Errorf("1-token prompt: %d tokens matched, want 0", got)
	}
	// Two more blocks of another chain overflow four blocks: the least
	// recently used goes, the tail of x's chain (x2), not its head.
	y := BlockHashes(seqIDs(500, 32))
	c.insert(y)
	if c.lru.Len() != 4 {
		t.Fatalf("%d blocks cached, want the cap of 4", c.lru.Len())
	}
	if got := c.match(x, 100); got != 32 {
		t.Errorf("after eviction: x matches %d tokens, want 32 (x2 evicted: a chain's tail goes first)", got)
	}
	if got := c.match(y, 100); got != 32 {
		t.Errorf("y matches %d tokens, want 32", got)
	}
}

// BenchmarkPrefixCache measures the prefix cache's work per request of a
// 4,096-token prompt that shares its first 3,072 tokens with the cache's
// contents: hashing the prompt's 256 blocks, matching and inserting them in
// a cache of 18,125 blocks (the t4 batching profile's 290,000-token KV
// budget), full and evicting.
func BenchmarkPrefixCache(b *testing.B) {
	c := NewPrefixCache(290000)
	for i := range c.capBlocks / 256 {
		c.insert(BlockHashes(seqIDs(1_000_000*(i+1), 4096)))
	}
	shared := seqIDs(0, 3072)
	c.insert(BlockHashes(shared))
	i := 0
	for b.Loop() {
		ids := append(shared[:3072:3072], seqIDs(5_000_000+1024*i, 1024)...)
		i++
		blocks := BlockHashes(ids)
		if hit := c.match(blocks, len(ids)); hit != 3072 {
			b.Fatalf("hit %d tokens, want 3072", hit)
		}
		c.insert(blocks)
	}
}
