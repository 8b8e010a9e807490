package sim

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/rehearse/rehearse/internal/sim/engine"
)

// outputWords are the pieces the simulator emits, one per output token.
// Each is a space followed by lowercase ASCII letters: a whole vocabulary
// entry of byte-level BPE tokenizers such as Qwen's, and the split regex
// cuts any concatenation of them at every space, so n pieces re-tokenize to
// exactly n tokens. New checks each against the tokenizer in use.
var outputWords = strings.Fields(`the of and to in is that for it as with was on be by at
this are from or have an they which one you were all we her she there would their will
when can more if no out so said what up its about into than them only other new some
could time these two may then first any like now my such make over our even most made
after also did many before must through back years where much your way well down should
because each just those people how too little state good very world still own see men
work long here get both between life being under never day same another know while last
might us great old year off come since against go came right used take three`)

// outputPieces are the output words with their leading space, and
// outputPiecesJSON the same as JSON strings, ready to append to a chunk.
var outputPieces, outputPiecesJSON = func() ([]string, [][]byte) {
	pieces := make([]string, len(outputWords))
	quoted := make([][]byte, len(outputWords))
	for i, w := range outputWords {
		pieces[i] = " " + w
		quoted[i] = strconv.AppendQuote(nil, pieces[i]) // ASCII letters and a space: valid JSON
	}
	return pieces, quoted
}()

// textSource yields the output text of one sequence: piece i is a word
// chosen by a hash of the seed, the prompt and i, so a prompt gets the same
// text every time, as a temperature-0 model gives.
type textSource struct {
	base uint64
}

func newTextSource(seed int64, prompt string) textSource {
	h := fnv.New64a()
	fmt.Fprintf(h, "text\x00%d\x00", seed)
	h.Write([]byte(prompt))
	return textSource{base: h.Sum64()}
}

// index is the word index of output token i (0-based).
func (t textSource) index(i int) int {
	x := t.base + uint64(i)*0x9e3779b97f4a7c15
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % uint64(len(outputWords)))
}

// piece is the text of output token i.
func (t textSource) piece(i int) string { return outputPieces[t.index(i)] }

// appendPieceJSON appends output token i as a JSON string.
func (t textSource) appendPieceJSON(dst []byte, i int) []byte {
	return append(dst, outputPiecesJSON[t.index(i)]...)
}

// text is the whole output of n tokens.
func (t textSource) text(n int) string { return t.textRange(0, n) }

// textRange is the text of output tokens lo to hi-1.
func (t textSource) textRange(lo, hi int) string {
	var b strings.Builder
	for i := lo; i < hi; i++ {
		b.WriteString(t.piece(i))
	}
	return b.String()
}

// checkOutputWords verifies that every output piece is one token and that
// a run of them counts exactly one token per piece.
func checkOutputWords(c engine.Counter) error {
	var all strings.Builder
	for _, p := range outputPieces {
		if n := c.Count(p); n != 1 {
			return fmt.Errorf("sim: output piece %q is %d tokens with this tokenizer, want 1", p, n)
		}
		all.WriteString(p)
	}
	if n := c.Count(all.String()); n != len(outputWords) {
		return fmt.Errorf("sim: %d output pieces concatenated count %d tokens with this tokenizer", len(outputWords), n)
	}
	return nil
}
