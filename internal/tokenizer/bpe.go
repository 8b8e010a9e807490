package tokenizer

import "fmt"

// merge is what a pair of adjacent tokens becomes, and how early.
type merge struct {
	rank  int32
	newID int32
}

// bpe is the byte-level BPE model: byte tokens, merges by rank.
type bpe struct {
	byteID [256]int32
	merges mergeTable
	// bytePairs holds the merge of every pair of byte tokens, dense, for the
	// first round of lookups; rank noMerge where there is none.
	bytePairs []merge
}

// mergeTable is an open-addressing hash table from a pair of ids to its
// merge, one cache line probe in the common case: a Go map of 151k entries
// costs more per lookup, and lookups are most of BPE's time.
type mergeTable struct {
	slots []mergeSlot // len is a power of two; key 0 marks an empty slot
	shift uint
	n     int
}

type mergeSlot struct {
	key uint64 // pairKey | 1<<63
	val uint64 // rank << 32 | new id
}

const occupied = 1 << 63

func newMergeTable(n int) mergeTable {
	size, shift := 1, uint(64)
	for size < 2*n+16 {
		size <<= 1
		shift--
	}
	return mergeTable{slots: make([]mergeSlot, size), shift: shift}
}

func (t *mergeTable) home(k uint64) uint64 { return (k * 0x9E3779B97F4A7C15) >> t.shift }

func (t *mergeTable) put(k uint64, m merge) {
	k |= occupied
	mask := uint64(len(t.slots) - 1)
	for i := t.home(k); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == 0 {
			t.n++
		} else if s.key != k {
			continue
		}
		*s = mergeSlot{key: k, val: uint64(uint32(m.rank))<<32 | uint64(uint32(m.newID))}
		return
	}
}

func (t *mergeTable) get(k uint64) (merge, bool) {
	k |= occupied
	mask := uint64(len(t.slots) - 1)
	for i := t.home(k); ; i = (i + 1) & mask {
		s := t.slots[i]
		if s.key == k {
			return merge{rank: int32(s.val >> 32), newID: int32(uint32(s.val))}, true
		}
		if s.key == 0 {
			return merge{}, false
		}
	}
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func newBPE(vocab map[string]int, merges [][2]string) (*bpe, error) {
	m := &bpe{merges: newMergeTable(len(merges))}
	for i := 0; i < 256; i++ {
		m.byteID[i] = int32(vocab[string([]byte{byte(i)})])
	}
	var buf []byte
	for rank, mg := range merges {
		a, okA := vocab[mg[0]]
		b, okB := vocab[mg[1]]
		buf = append(append(buf[:0], mg[0]...), mg[1]...)
		n, okN := vocab[string(buf)]
		switch {
		case !okA:
			return nil, fmt.Errorf("model.merges[%d]: token %q is not in the vocabulary", rank, byteLevelEncode([]byte(mg[0])))
		case !okB:
			return nil, fmt.Errorf("model.merges[%d]: token %q is not in the vocabulary", rank, byteLevelEncode([]byte(mg[1])))
		case !okN:
			return nil, fmt.Errorf("model.merges[%d]: merged token %q is not in the vocabulary", rank, byteLevelEncode([]byte(mg[0]+mg[1])))
		}
		// A repeated merge keeps its last rank, as the library's map does.
		m.merges.put(pairKey(int32(a), int32(b)), merge{rank: int32(rank), newID: int32(n)})
	}
	m.bytePairs = make([]merge, 1<<16)
	for a := 0; a < 256; a++ {
		for b := 0; b < 256; b++ {
			r, n := m.rankOf(m.byteID[a], m.byteID[b])
			m.bytePairs[a<<8|b] = merge{rank: r, newID: n}
		}
	}
	return m, nil
}

const noMerge = int32(1<<31 - 1)

func (m *bpe) rankOf(a, b int32) (int32, int32) {
	if mg, ok := m.merges.get(pairKey(a, b)); ok {
		return mg.rank, mg.newID
	}
	return noMerge, -1
}

// smallPiece is the longest piece merged by the quadratic scan; longer ones
// use a heap so adversarial input stays O(n log n).
const smallPiece = 256

// encode appends the ids of piece (raw bytes) to dst.
func (m *bpe) encode(dst []int, piece string) []int {
	if len(piece) == 1 {
		return append(dst, int(m.byteID[piece[0]]))
	}
	if len(piece) > smallPiece {
		return m.encodeHeap(dst, piece)
	}
	var idsBuf, ranksBuf, newBuf [smallPiece]int32
	n := len(piece)
	ids := idsBuf[:n]
	for i := 0; i < n; i++ {
		ids[i] = m.byteID[piece[i]]
	}
	ranks := ranksBuf[:n-1]
	newIDs := newBuf[:n-1]
	for i := 0; i < n-1; i++ {
		bp := m.bytePairs[int(piece[i])<<8|int(piece[i+1])]
		ranks[i], newIDs[i] = bp.rank, bp.newID
	}
	for len(ids) > 1 {
		best := 0
		for i := 1; i < len(ranks); i++ {
			if ranks[i] < ranks[best] {
				best = i
			}
		}
		if ranks[best] == noMerge {
			break
		}
		ids[best] = newIDs[best]
		copy(ids[best+1:], ids[best+2:])
		ids = ids[:len(ids)-1]
		copy(ranks[best:], ranks[best+1:])
		copy(newIDs[best:], newIDs[best+1:])
		ranks = ranks[:len(ranks)-1]
		newIDs = newIDs[:len(newIDs)-1]
		if best > 0 {
			ranks[best-1], newIDs[best-1] = m.rankOf(ids[best-1], ids[best])
		}
		if best < len(ranks) {
			ranks[best], newIDs[best] = m.rankOf(ids[best], ids[best+1])
		}
	}
	for _, id := range ids {
		dst = append(dst, int(id))
	}
	return dst
}

type heapEntry struct {
	rank int32
	pos  int32
}

func (a heapEntry) less(b heapEntry) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

// mergeHeap is a binary min-heap of candidate merges by (rank, position).
type mergeHeap []heapEntry

func (h *mergeHeap) push(e heapEntry) {
	*h = append(*h, e)
	q := *h
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q[i].less(q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *mergeHeap) pop() heapEntry {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q[r].less(q[l]) {
			m = r
		}
		if !q[m].less(q[i]) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

func (h *mergeHeap) init() {
	q := *h
	for i := len(q)/2 - 1; i >= 0; i-- {
		for j := i; ; {
			l := 2*j + 1
			if l >= len(q) {
				break
			}
			m := l
			if r := l + 1; r < len(q) && q[r].less(q[l]) {
				m = r
			}
			if !q[m].less(q[j]) {
				break
			}
			q[j], q[m] = q[m], q[j]
			j = m
		}
	}
}

// encodeHeap merges a long piece: symbols in a linked list, candidate pairs
// in a heap ordered by (rank, position), stale entries skipped when popped.
func (m *bpe) encodeHeap(dst []int, piece string) []int {
	n := len(piece)
	ids := make([]int32, n)
	prev := make([]int32, n)
	next := make([]int32, n)
	for i := 0; i < n; i++ {
		ids[i] = m.byteID[piece[i]]
		prev[i] = int32(i - 1)
		next[i] = int32(i + 1)
	}
	next[n-1] = -1
	h := make(mergeHeap, 0, n)
	for i := 0; i < n-1; i++ {
		if r := m.bytePairs[int(piece[i])<<8|int(piece[i+1])].rank; r != noMerge {
			h = append(h, heapEntry{rank: r, pos: int32(i)})
		}
	}
	h.init()
	for len(h) > 0 {
		e := h.pop()
		p := e.pos
		if ids[p] < 0 {
			continue // merged into its left neighbour
		}
		q := next[p]
		if q < 0 {
			continue
		}
		r, nid := m.rankOf(ids[p], ids[q])
		if r != e.rank {
			continue // the pair changed since this entry was pushed
		}
		ids[p] = nid
		ids[q] = -1
		next[p] = next[q]
		if next[q] >= 0 {
			prev[next[q]] = p
		}
		if pp := prev[p]; pp >= 0 {
			if r, _ := m.rankOf(ids[pp], ids[p]); r != noMerge {
				h.push(heapEntry{rank: r, pos: pp})
			}
		}
		if nn := next[p]; nn >= 0 {
			if r, _ := m.rankOf(ids[p], ids[nn]); r != noMerge {
				h.push(heapEntry{rank: r, pos: p})
			}
		}
	}
	for i := int32(0); i >= 0; i = next[i] {
		dst = append(dst, int(ids[i]))
	}
	return dst
}
