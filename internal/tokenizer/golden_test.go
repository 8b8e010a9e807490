package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"sync"
	"testing"
)

// The golden ids come from Hugging Face's tokenizers 0.23.2 (npm binding):
//
//	node bench/tokenizer/make-corpus.js > internal/tokenizer/testdata/corpus.jsonl
//	node bench/tokenizer/golden.js < internal/tokenizer/testdata/corpus.jsonl \
//	  > internal/tokenizer/testdata/golden.jsonl

var variantNames = []string{"qwen3", "qwen2.5", "llama3", "gpt2", "normalized"}

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var variantCache sync.Map // name → *Tokenizer

func variantTokenizer(t testing.TB, variant string) *Tokenizer {
	t.Helper()
	if v, ok := variantCache.Load(variant); ok {
		return v.(*Tokenizer)
	}
	var tok *Tokenizer
	var err error
	switch variant {
	case "qwen3":
		tok, err = Default()
	case "qwen2.5":
		tok, err = Qwen25()
	default:
		// The embedded config with the variant's components, sharing its
		// model: parsing those components from JSON is TestVariantJSON's job.
		var c *config
		if c, err = embeddedConfig(); err != nil {
			break
		}
		v := *c
		switch variant {
		case "llama3":
			v.split, v.ignoreMerges = splitLlama3, true
		case "gpt2":
			v.split, v.nfc = splitGPT2, false
		case "normalized":
			v.addedTokens = nil
			for _, a := range c.addedTokens {
				a.Normalized = true
				v.addedTokens = append(v.addedTokens, a)
			}
			v.addedTokens = append(v.addedTokens,
				addedTokenJSON{ID: 151669, Content: "\u00e9t\u00e9", Normalized: true},
				addedTokenJSON{ID: 151670, Content: "n\u0303", Normalized: false})
		default:
			t.Fatalf("unknown variant %q", variant)
		}
		tok = v.build(nil)
	}
	if err != nil {
		t.Fatalf("variant %s: %v", variant, err)
	}
	variantCache.Store(variant, tok)
	return tok
}

type corpusEntry struct {
	Name string `json:"name"`
	Text string `json:"text"`
	IDs  []int  `json:"ids"` // when Text is the library's decoding of them
}

type goldenEntry struct {
	Ids map[string][]int
	NFC string
}

func readJSONL[T any](t testing.TB, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for line := 1; sc.Scan(); line++ {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s:%d: %v", path, line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func readGolden(t testing.TB) ([]corpusEntry, []goldenEntry) {
	corpus := readJSONL[corpusEntry](t, "testdata/corpus.jsonl")
	raw := readJSONL[map[string]json.RawMessage](t, "testdata/golden.jsonl")
	if len(raw) != len(corpus) {
		t.Fatalf("golden.jsonl has %d lines, corpus.jsonl %d", len(raw), len(corpus))
	}
	golden := make([]goldenEntry, len(raw))
	for i, r := range raw {
		golden[i].Ids = map[string][]int{}
		for k, v := range r {
			if k == "nfc" {
				if err := json.Unmarshal(v, &golden[i].NFC); err != nil {
					t.Fatal(err)
				}
				continue
			}
			var ids []int
			if err := json.Unmarshal(v, &ids); err != nil {
				t.Fatal(err)
			}
			golden[i].Ids[k] = ids
		}
	}
	return corpus, golden
}

func TestGoldenCorpus(t *testing.T) {
	corpus, golden := readGolden(t)
	for _, v := range variantNames {
		tok := variantTokenizer(t, v)
		t.Run(v, func(t *testing.T) {
			bad := 0
			for i, c := range corpus {
				if raceEnabled && i%4 != 0 {
					continue // a quarter of the corpus under -race; all of it otherwise
				}
				want, ok := golden[i].Ids[v]
				if !ok {
					t.Fatalf("golden line %d lacks variant %s", i+1, v)
				}
				got := tok.Encode(c.Text)
				if !slices.Equal(got, want) {
					bad++
					if bad <= 10 {
						t.Errorf("%s (line %d) %q:\n got %v\nwant %v", c.Name, i+1, c.Text, got, want)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%s: %d of %d texts differ from the library", v, bad, len(corpus))
			}
		})
	}
}

// TestVariantComponents checks that the components bench/tokenizer/lib.js
// writes into the llama3 and gpt2 variants parse to what the golden test
// builds those variants with.
func TestVariantComponents(t *testing.T) {
	llama3 := mustJSON(t, map[string]any{
		"type": "Sequence",
		"pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": llama3Pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		},
	})
	gpt2 := mustJSON(t, map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})
	for _, c := range []struct {
		name string
		raw  json.RawMessage
		want splitKind
	}{{"llama3", llama3, splitLlama3}, {"gpt2", gpt2, splitGPT2}} {
		got, err := parsePreTokenizer(c.raw)
		if err != nil || got != c.want {
			t.Errorf("%s: pre_tokenizer parses to %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	if nfc, err := parseNormalizer(json.RawMessage("null")); err != nil || nfc {
		t.Errorf("normalizer null parses to nfc %v, %v", nfc, err)
	}
}

func TestGoldenNFC(t *testing.T) {
	corpus, golden := readGolden(t)
	for i, c := range corpus {
		if got := nfc(c.Text); got != golden[i].NFC {
			t.Errorf("%s (line %d): nfc(%+q) = %+q, library %+q", c.Name, i+1, c.Text, got, golden[i].NFC)
		}
	}
}

// TestGoldenDecode: Decode of random ids (partial UTF-8 sequences, added
// tokens) gives the library's text, U+FFFD for U+FFFD.
func TestGoldenDecode(t *testing.T) {
	corpus := readJSONL[corpusEntry](t, "testdata/corpus.jsonl")
	tok := variantTokenizer(t, "qwen3")
	n := 0
	for i, c := range corpus {
		if c.IDs == nil {
			continue
		}
		n++
		if got := tok.Decode(c.IDs); got != c.Text {
			t.Errorf("%s (line %d): Decode(%v)\n got %+q\nwant %+q", c.Name, i+1, c.IDs, got, c.Text)
		}
	}
	if n == 0 {
		t.Fatal("the corpus has no decoded ids")
	}
	// Added tokens decode as the ByteLevel decoder has them: characters
	// mapped to bytes when all are in its alphabet ("été" is E9 74 E9, not
	// UTF-8), else the token's own UTF-8 ("n" U+0303). From the npm binding:
	// decode([9707, 151669, 151670]) in the normalized variant.
	norm := variantTokenizer(t, "normalized")
	if got, want := norm.Decode([]int{9707, 151669, 151670}), "Hello\uFFFDt\uFFFDn\u0303"; got != want {
		t.Errorf("normalized variant: Decode = %+q, want %+q", got, want)
	}
}
