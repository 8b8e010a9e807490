package tokenizer

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// randomText builds text from the pieces that stress a byte-level BPE
// tokenizer: white space of every kind, apostrophes before contraction
// letters in any case, digits, letters where Unicode versions differ,
// combining marks, CJK, emoji, added tokens and their fragments.
func randomText(r *rand.Rand) string {
	pools := [][]string{
		{" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2003", "\v", "\f", "\u0085", "\u2028", "\u200b"},
		{"'", "'s", "'S", "'ſ", "'t", "'RE", "'vE", "'m", "'Ll", "'d", "’s", "'x"},
		{"0", "12", "345", "6789", "٣", "१", "①", "Ⅻ", "²"},
		{"a", "The", "naïve", "Straße", "İ", "ſ", "Ωμέγα", "Привет", "שלום", "مرحبا", "नमस्ते", "ไทย", "ქართ", "Ǆ"},
		{"\u0301", "\u0323", "\u0308\u0304", "\u1dfa", "\u1ac1", "\u0334", "\u05bc", "\u093c", "\u0f73", "\u0344", "\u212b", "\u1161", "\u11a8"},
		{"中文", "日本語", "한국어", "\u1100\u1161\u11a8", "ｶﾀｶﾅ", "𠀀", "𪜀"},
		{"😀", "👍🏽", "👨‍👩‍👧", "🇩🇪", "❤️", "#️⃣", "\u200d", "\ufe0f"},
		{"<think>", "</think>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_response>", "<", "|>", "<thi", "nk>"},
		{".", ",", "!!", "...", "()", "{}", "\"", "\\", "->", "==", "#", "@", "$", "%", "&&", "//"},
	}
	var b strings.Builder
	n := 1 + r.IntN(30)
	for i := 0; i < n; i++ {
		switch r.IntN(12) {
		case 0: // any code point from a random plane
			cp := rune(r.IntN(0x32000))
			if r.IntN(4) == 0 {
				cp = rune(0xE0000 + r.IntN(0x200))
			}
			if utf8.ValidRune(cp) {
				b.WriteRune(cp)
			}
		default:
			p := pools[r.IntN(len(pools))]
			b.WriteString(p[r.IntN(len(p))])
		}
	}
	return b.String()
}

// TestLiveLibrary compares Encode and NFC with Hugging Face's tokenizers
// (npm binding) on fresh random text. It runs where node and the binding are
// installed: cd bench/tokenizer && npm install (tokenizers@0.23.2).
func TestLiveLibrary(t *testing.T) {
	if raceEnabled {
		t.Skip("not under -race (the detector adds nothing here); run without -race to compare live")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed; the committed golden ids are checked by TestGoldenCorpus")
	}
	script, err := filepath.Abs("../../bench/tokenizer/golden.js")
	if err != nil {
		t.Fatal(err)
	}
	probe := exec.Command(node, "-e", "require('tokenizers')")
	probe.Dir = filepath.Dir(script)
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("the tokenizers npm binding is not installed (cd bench/tokenizer && npm install): %v: %s", err, firstLine(out))
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TOKENIZER_LIVE_SEED"); s != "" {
		if err := json.Unmarshal([]byte(s), &seed); err != nil {
			t.Fatalf("TOKENIZER_LIVE_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (rerun with TOKENIZER_LIVE_SEED=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 0x70ce))
	texts := make([]string, 300)
	var in bytes.Buffer
	for i := range texts {
		texts[i] = randomText(r)
		line, _ := json.Marshal(map[string]string{"text": texts[i]})
		in.Write(line)
		in.WriteByte('\n')
	}
	cmd := exec.Command(node, script)
	cmd.Dir = filepath.Dir(script)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node golden.js: %v: %s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("node answered %d lines for %d texts", len(lines), len(texts))
	}
	toks := map[string]*Tokenizer{}
	for _, v := range variantNames {
		toks[v] = variantTokenizer(t, v)
	}
	bad := 0
	for i, l := range lines {
		var rec map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		var wantNFC string
		json.Unmarshal(rec["nfc"], &wantNFC)
		if got := nfc(texts[i]); got != wantNFC {
			bad++
			t.Errorf("nfc(%+q) = %+q, library %+q", texts[i], got, wantNFC)
		}
		for _, v := range variantNames {
			var want []int
			json.Unmarshal(rec[v], &want)
			if got := toks[v].Encode(texts[i]); !slices.Equal(got, want) {
				bad++
				if bad < 10 {
					t.Errorf("%s: Encode(%+q)\n got %v\nwant %v", v, texts[i], got, want)
				}
			}
		}
	}
	t.Logf("%d random texts, %d variants: %d differences", len(texts), len(variantNames), bad)
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

// FuzzEncode: no input panics, and decoding the ids gives back the text in
// NFC (each stretch between added tokens normalized on its own, as the
// library does), with invalid UTF-8 read as U+FFFD.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "Hello world", "it'S  \r\n\t x", "e\u0301\u0323", "<think>a</think>b", "\xff\xe2\x82", "中文👍🏽", strings.Repeat("a", 100)} {
		f.Add(s)
	}
	tok, err := Default()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		if tok.Count(s) != len(ids) {
			t.Fatalf("Count(%q) = %d, len(Encode) = %d", s, tok.Count(s), len(ids))
		}
		valid := s
		if !utf8.ValidString(s) {
			valid = string(appendLossy(nil, []byte(s)))
		}
		var want strings.Builder
		rest := valid
		for {
			start, end, _ := tok.added.raw.find(rest)
			if start < 0 {
				want.WriteString(nfc(rest))
				break
			}
			want.WriteString(nfc(rest[:start]))
			want.WriteString(rest[start:end])
			rest = rest[end:]
		}
		if got := tok.Decode(ids); got != want.String() {
			t.Fatalf("Decode(Encode(%+q)) = %+q, want %+q", s, got, want.String())
		}
		if n := nfc(want.String()); n != want.String() && !strings.Contains(valid, "<") {
			t.Fatalf("nfc is not idempotent on %+q: %+q", want.String(), n)
		}
	})
}
