package tokenizer

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func mustDefault(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestEmbeddedDigest(t *testing.T) {
	zr, err := gzip.NewReader(bytes.NewReader(qwen3JSON))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != EmbeddedSHA256 {
		t.Fatalf("embedded tokenizer.json has SHA-256 %s, want %s", got, EmbeddedSHA256)
	}
	tok := mustDefault(t)
	if info := tok.Info(); info.SHA256 != EmbeddedSHA256 || info.Source != "embedded" || info.Name != VariantQwen3 || info.AddedTokens != 26 {
		t.Errorf("Default().Info() = %+v", info)
	}
	q25, err := Qwen25()
	if err != nil {
		t.Fatal(err)
	}
	if info := q25.Info(); info.SHA256 != EmbeddedSHA256 || info.Name != VariantQwen25 || info.AddedTokens != 22 {
		t.Errorf("Qwen25().Info() = %+v", info)
	}
	// SPEC §6: 151,643 base tokens; Qwen3 adds 26 added tokens, Qwen2.5 22.
	if tok.VocabSize() != 151669 || q25.VocabSize() != 151665 {
		t.Errorf("vocab sizes %d and %d, want 151669 and 151665", tok.VocabSize(), q25.VocabSize())
	}
	if n := tok.model.merges.n; n != 151387 {
		t.Errorf("%d merges, want 151387", n)
	}
	if again, _ := Default(); again != tok {
		t.Error("Default() is not shared")
	}
}

func TestQwen25DropsFour(t *testing.T) {
	q3 := mustDefault(t)
	q25, err := Qwen25()
	if err != nil {
		t.Fatal(err)
	}
	a3, a25 := q3.AddedTokens(), q25.AddedTokens()
	var gone []string
	for _, a := range a3 {
		if !slices.Contains(a25, a) {
			gone = append(gone, a)
		}
	}
	slices.Sort(gone)
	if want := []string{"</think>", "</tool_response>", "<think>", "<tool_response>"}; !slices.Equal(gone, want) {
		t.Errorf("Qwen2.5 lacks %v, want %v", gone, want)
	}
	text := "<|im_start|>assistant\n<think>\nx\n</think>\n<|im_end|>"
	if a, b := q3.Count(text), q25.Count(text); a >= b {
		t.Errorf("Qwen3 counts %d, Qwen2.5 %d tokens in %q: Qwen3 should count fewer", a, b, text)
	}
	if _, ok := q25.TokenBytes(151667); ok {
		t.Error("Qwen2.5 decodes id 151667 (<think>), which it lacks")
	}
	if _, err := Embedded("qwen9"); err == nil || !strings.Contains(err.Error(), `"qwen9"`) {
		t.Errorf("Embedded(qwen9) error = %v", err)
	}
}

func TestDecode(t *testing.T) {
	tok := mustDefault(t)
	for _, s := range []string{"", "Hello, world!", "你好 👍🏽\r\n\t x", "<think>a</think>", "e\u0301"} {
		want := nfc(s)
		if got := tok.Decode(tok.Encode(s)); got != want {
			t.Errorf("Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
	}
	// A lone byte of a multi-byte character decodes to U+FFFD, as the
	// library's lossy UTF-8 conversion does.
	ids := tok.Encode("€") // E2 82 AC
	var parts [][]byte
	for _, id := range ids {
		b, ok := tok.TokenBytes(id)
		if !ok {
			t.Fatalf("TokenBytes(%d) missing", id)
		}
		parts = append(parts, b)
	}
	if !bytes.Equal(bytes.Join(parts, nil), []byte("€")) {
		t.Fatalf("token bytes of € = %x", parts)
	}
	if _, ok := tok.TokenBytes(-1); ok {
		t.Error("TokenBytes(-1) ok")
	}
	if _, ok := tok.TokenBytes(tok.VocabSize()); ok {
		t.Error("TokenBytes(VocabSize()) ok")
	}
	if got := tok.Decode([]int{-5, 9707, 1 << 30}); got != "Hello" {
		t.Errorf("Decode skips unknown ids: got %q", got)
	}
}

func TestAppendLossy(t *testing.T) {
	// Expected values follow Rust's String::from_utf8_lossy (maximal subparts).
	for _, c := range []struct{ in, want string }{
		{"abc", "abc"},
		{"\xe2\x82", "\uFFFD"},
		{"\xe2\x82x", "\uFFFDx"},
		{"\xf0\x9f\x98", "\uFFFD"},
		{"\xf0\x9f\x98\xf0\x9f\x98\x80", "\uFFFD😀"},
		{"\xff\xfe", "\uFFFD\uFFFD"},
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"}, // a surrogate: E0-ED second byte range fails at once
		{"\xc0\xaf", "\uFFFD\uFFFD"},
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"\xe0\x80", "\uFFFD\uFFFD"},
		{"a\x80b", "a\uFFFDb"},
	} {
		if got := string(appendLossy(nil, []byte(c.in))); got != c.want {
			t.Errorf("appendLossy(%q) = %+q, want %+q", c.in, got, c.want)
		}
	}
	// Encode reads invalid UTF-8 the same way.
	tok := mustDefault(t)
	if a, b := tok.Encode("x\xe2\x82y"), tok.Encode("x\uFFFDy"); !slices.Equal(a, b) {
		t.Errorf("Encode of invalid UTF-8 = %v, want %v", a, b)
	}
}

// TestProbedTables checks the class tables built at init against the probe
// file the library answered, line by line, and the contraction folds.
func TestProbedTables(t *testing.T) {
	f, err := os.Open("testdata/unicode/tokenizers-0.23.2.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := make([]uint8, 0x110000)
	folds := map[string][]rune{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 || fs[0] == "#" {
			continue
		}
		hexRune := func(s string) rune {
			v, err := strconv.ParseUint(s, 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return rune(v)
		}
		bit := map[string]uint8{"L": clsL, "N": clsN, "S": clsS}[fs[0]]
		switch fs[0] {
		case "L", "N", "S":
			for r := hexRune(fs[1]); r <= hexRune(fs[2]); r++ {
				want[r] |= bit
			}
		case "F":
			folds[fs[1]] = append(folds[fs[1]], hexRune(fs[2]))
		}
	}
	bad := 0
	for r := rune(0); r < 0x110000; r++ {
		if got := runeClass(r) & (clsL | clsN | clsS); got != want[r] {
			bad++
			if bad < 10 {
				t.Errorf("U+%04X: class %03b, library %03b", r, got, want[r])
			}
		}
	}
	// contraction() must accept exactly the letters the library's (?i)
	// matched: for one-letter contractions, and the first letter of the
	// two-letter ones.
	for _, x := range []string{"s", "t", "m", "d"} {
		for _, r := range folds[x] {
			s := string(r) + "a"
			if n := contraction(s, 0, true); n != utf8.RuneLen(r) {
				t.Errorf("contraction(%q) = %d, the library matched '%c as 's", s, n, r)
			}
		}
	}
	for r := rune(0); r < 0x110000; r++ {
		if want[r]&clsL == 0 || r == 's' || r == 'S' || r == 't' || r == 'T' || r == 'm' || r == 'M' || r == 'd' || r == 'D' {
			continue
		}
		if n := contraction(string(r)+"a", 0, true); n != 0 && !slices.Contains(folds["s"], r) {
			t.Errorf("contraction accepts U+%04X, which the library does not fold", r)
		}
	}
}

func TestConcurrentEncode(t *testing.T) {
	tok := mustDefault(t)
	corpus := readJSONL[corpusEntry](t, "testdata/corpus.jsonl")
	want := make([][]int, len(corpus))
	for i, c := range corpus {
		want[i] = tok.Encode(c.Text)
	}
	fresh, err := Parse(mustEmbedded(t)) // a tokenizer no one has used: reach table empty
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := range corpus {
				i := (k*7 + g*131) % len(corpus)
				if got := fresh.Encode(corpus[i].Text); !slices.Equal(got, want[i]) {
					errs <- corpus[i].Name
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for name := range errs {
		t.Errorf("concurrent Encode differs on %s", name)
	}
}

func mustEmbedded(t testing.TB) []byte {
	t.Helper()
	data, err := embeddedJSON()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// tinyJSON is a byte-level BPE tokenizer.json with the 256 byte tokens, the
// tokens "ab" and "abc" with their merges, and one added token, edited by
// edit before it is written.
func tinyJSON(t testing.TB, edit func(j map[string]any)) []byte {
	t.Helper()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	vocab["ab"] = 256
	vocab["abc"] = 257
	j := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens": []any{map[string]any{"id": 258, "content": "<x>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}},
		"normalizer":   map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": qwen2Pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "", "end_of_word_suffix": "",
			"fuse_unk": false, "byte_fallback": false, "ignore_merges": false, "vocab": vocab, "merges": []any{[]string{"a", "b"}, []string{"ab", "c"}}},
	}
	if edit != nil {
		edit(j)
	}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseTiny(t *testing.T) {
	tok, err := Parse(tinyJSON(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tok.Encode("abc abab<x>c"), []int{257, ' ', 256, 256, 258, 'c'}; !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	// The same merges written as "a b" strings.
	tok2, err := Parse(tinyJSON(t, func(j map[string]any) {
		j["model"].(map[string]any)["merges"] = []string{"a b", "ab c"}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := tok2.Encode("abc"); !slices.Equal(got, []int{257}) {
		t.Errorf("string merges: Encode(abc) = %v", got)
	}
}

func TestParseRefuses(t *testing.T) {
	model := func(key string, v any) func(map[string]any) {
		return func(j map[string]any) { j["model"].(map[string]any)[key] = v }
	}
	top := func(key string, v any) func(map[string]any) {
		return func(j map[string]any) { j[key] = v }
	}
	split := func(regex string) func(map[string]any) {
		return top("pre_tokenizer", map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": regex}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
		}})
	}
	for _, c := range []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"wordpiece", model("type", "WordPiece"), `model.type "WordPiece" is not implemented`},
		// Files of another kind fail the vocabulary's scan; the component is named.
		{"unigram", func(j map[string]any) {
			m := j["model"].(map[string]any)
			m["type"], m["vocab"] = "Unigram", []any{[]any{"<unk>", 0.0}, []any{"▁a", -1.5}}
		}, `model.type "Unigram" is not implemented`},
		{"sentencepiece bpe", func(j map[string]any) {
			m := j["model"].(map[string]any)
			m["byte_fallback"], m["vocab"] = true, map[string]any{"<0x00>": 0, "▁▁": 1}
			j["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁"}
		}, "model.byte_fallback true: a SentencePiece-style BPE"},
		{"deepseek-style splits", top("pre_tokenizer", map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split"}, map[string]any{"type": "Split"}, map[string]any{"type": "ByteLevel"}}}), "a Sequence of 3 pre-tokenizers is not implemented"},
		{"dropout", model("dropout", 0.1), "model.dropout 0.1"},
		{"byte fallback", model("byte_fallback", true), "model.byte_fallback"},
		{"prefix", model("continuing_subword_prefix", "##"), "continuing_subword_prefix"},
		{"nfkc", top("normalizer", map[string]any{"type": "NFKC"}), `normalizer type "NFKC" is not implemented`},
		{"lowercase seq", top("normalizer", map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFC"}, map[string]any{"type": "Lowercase"}}}), `"Lowercase"`},
		{"other regex", split(`\w+|\s+`), `Split regex "\\w+|\\s+" is not implemented`},
		{"metaspace", top("pre_tokenizer", map[string]any{"type": "Metaspace"}), `pre_tokenizer type "Metaspace"`},
		{"prefix space", top("pre_tokenizer", map[string]any{"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}), "add_prefix_space true"},
		{"no pre_tokenizer", top("pre_tokenizer", nil), "pre_tokenizer is null"},
		{"decoder", top("decoder", map[string]any{"type": "WordPiece"}), `decoder type "WordPiece"`},
		{"truncation", top("truncation", map[string]any{"max_length": 8}), "truncation is set"},
		{"lstrip", top("added_tokens", []any{map[string]any{"id": 300, "content": "<y>", "lstrip": true}}), `added token "<y>" (id 300) uses single_word/lstrip/rstrip`},
		{"not byte-level", model("vocab", map[string]any{"a b": 0}), `model.vocab token "a b" is not byte-level`},
		{"missing byte", func(j map[string]any) { delete(j["model"].(map[string]any)["vocab"].(map[string]int), "a") }, "lacks the token for byte 0x61"},
		{"merge not in vocab", model("merges", []string{"a z", "q r"}), `model.merges[0]: merged token "az" is not in the vocabulary`},
		{"bad merge", model("merges", []string{"abc"}), `model.merges[0] "abc" is not two tokens`},
		{"huge id", top("added_tokens", []any{map[string]any{"id": 1 << 30, "content": "<y>"}}), "over the"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(tinyJSON(t, c.edit))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse error = %v, want it to contain %q", err, c.want)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
	for _, bad := range []string{"", "{", "[]", `{"model": 3}`, `{"model": {"type": "BPE"}}`, `{"model": {"vocab": {"a": -1}}}`, "{} x"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func TestLoadNamesFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(p, tinyJSON(t, func(j map[string]any) { j["model"].(map[string]any)["type"] = "Unigram" }), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.HasPrefix(err.Error(), p+": ") {
		t.Errorf("Load error = %v, want it to start with the path", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("Load of a missing file: %v", err)
	}
	good := tinyJSON(t, nil)
	if err := os.WriteFile(p, good, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(good)
	if info := tok.Info(); info.Source != p || info.SHA256 != hex.EncodeToString(sum[:]) || info.AddedTokens != 1 {
		t.Errorf("Info = %+v", info)
	}
}

// TestAdversarial runs the inputs a benchmark times for linearity once, for
// correctness: long runs must encode to what the pieces encode to.
func TestAdversarial(t *testing.T) {
	tok := mustDefault(t)
	for _, s := range []string{
		strings.Repeat("a", 5000),
		strings.Repeat(" ", 5000),
		strings.Repeat("\n", 5000),
		strings.Repeat("!", 5000),
		strings.Repeat("9", 5000),
		strings.Repeat("é", 3000),
		strings.Repeat("\u0301", 3000),
		"a" + strings.Repeat("\u0301\u0316", 3000), // canonical ordering of a long run

		strings.Repeat("ab", 3000),
		strings.Repeat("中文", 3000),
	} {
		ids := tok.Encode(s)
		if got := tok.Decode(ids); got != nfc(s) {
			t.Errorf("round trip of %q×%d fails", s[:4], len(s))
		}
		// Heap merging must agree with the quadratic scan on long pieces.
		if len(s) > smallPiece {
			prefix := s[:smallPiece]
			var viaScan []int
			viaScan = tok.model.encode(viaScan, prefix)
			viaHeap := tok.model.encodeHeap(nil, prefix)
			if !slices.Equal(viaScan, viaHeap) {
				t.Errorf("%q: scan %v, heap %v", prefix, viaScan, viaHeap)
			}
		}
	}
}
