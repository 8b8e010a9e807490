package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// Speed is measured on three texts, cut into chunks of whole lines of at
// most 4 KiB (what a client counts is a response, not a book):
//
//	prose  the Go specification (GOROOT/doc/go_spec.html, tags stripped)
//	code   GOROOT/src/net/http/server.go
//	cjk    sentences of Chinese, Japanese and Korean vocabulary tokens
//
// speedTexts writes them to dir (or reuses those already there).
func speedTexts(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	names := []string{"prose", "code", "cjk"}
	paths := map[string]string{}
	have := true
	for _, n := range names {
		paths[n] = filepath.Join(dir, n+".txt")
		if _, err := os.Stat(paths[n]); err != nil {
			have = false
		}
	}
	if have {
		return paths
	}
	out, _ := exec.Command("go", "env", "GOROOT").Output()
	root := strings.TrimSpace(string(out))
	spec, err1 := os.ReadFile(filepath.Join(root, "doc", "go_spec.html"))
	code, err2 := os.ReadFile(filepath.Join(root, "src", "net", "http", "server.go"))
	if err1 != nil || err2 != nil {
		tb.Skipf("speed texts come from GOROOT (%s), which lacks them: %v %v", root, err1, err2)
	}
	tags := regexp.MustCompile(`<[^>]*>`)
	prose := html.UnescapeString(tags.ReplaceAllString(string(spec), ""))
	texts := map[string]string{"prose": prose, "code": string(code), "cjk": cjkText(tb, 200_000)}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for _, n := range names {
		if err := os.WriteFile(paths[n], []byte(texts[n]), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return paths
}

// cjkText strings together Han, kana and Hangul tokens of the vocabulary
// into clauses ended by CJK punctuation, with a fixed seed.
func cjkText(tb testing.TB, size int) string {
	tok := mustDefault(tb)
	var words []string
	for b := range tok.vocab {
		if !utf8.ValidString(b) || b == "" {
			continue
		}
		ok := true
		for _, r := range b {
			if !unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) {
				ok = false
				break
			}
		}
		if ok {
			words = append(words, b)
		}
	}
	slices.Sort(words)
	r := rand.New(rand.NewPCG(4, 2))
	var sb strings.Builder
	for sb.Len() < size {
		n := 2 + r.IntN(10) // clauses of 2 to 11 tokens, 3 to 20 characters

		for i := 0; i < n; i++ {
			sb.WriteString(words[r.IntN(len(words))])
		}
		sb.WriteString([]string{"，", "。", "、", "！", "？", "。\n"}[r.IntN(6)])
	}
	return sb.String()
}

// chunks cuts text into runs of whole lines of at most size bytes (a longer
// line is a chunk of its own), as bench/tokenizer/speed.js does.
func chunks(text string, size int) []string {
	var out []string
	start, cur := 0, 0
	for cur < len(text) {
		end := strings.IndexByte(text[cur:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += cur + 1
		}
		if cur > start && end-start > size {
			out = append(out, text[start:cur])
			start = cur
		}
		cur = end
	}
	if cur > start {
		out = append(out, text[start:cur])
	}
	return out
}

func benchChunks(b *testing.B, tok *Tokenizer, text string) {
	parts := chunks(text, 4096)
	var ids []int
	for _, p := range parts { // first use settles the whole-piece table
		ids = tok.AppendEncode(ids[:0], p)
	}
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		for _, p := range parts {
			ids = tok.AppendEncode(ids[:0], p)
		}
	}
}

// BenchmarkEncode: throughput on prose, code and CJK, one goroutine; the
// uncached runs merge every piece that is not one token each time.
func BenchmarkEncode(b *testing.B) {
	dir := os.Getenv("TOKENIZER_SPEED_DIR")
	if dir == "" {
		dir = filepath.Join(b.TempDir(), "speed")
	}
	paths := speedTexts(b, dir)
	for _, n := range []string{"prose", "code", "cjk"} {
		text, err := os.ReadFile(paths[n])
		if err != nil {
			b.Fatal(err)
		}
		b.Run(n, func(b *testing.B) { benchChunks(b, mustDefault(b), string(text)) })
		b.Run(n+"/uncached", func(b *testing.B) {
			tok, err := Parse(mustEmbedded(b))
			if err != nil {
				b.Fatal(err)
			}
			tok.cache.slots = nil
			benchChunks(b, tok, string(text))
		})
	}
}

// BenchmarkAdversarial: one piece of 256 KiB and of 1 MiB; ns/op per byte
// should stay near constant (near-linear time).
func BenchmarkAdversarial(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	letters := func(n int) string {
		s := make([]byte, n)
		for i := range s {
			s[i] = byte('a' + r.IntN(26))
		}
		return string(s)
	}
	tok := mustDefault(b)
	for _, size := range []int{256 << 10, 1 << 20} {
		for _, c := range []struct {
			name string
			text string
		}{
			{"no-spaces", letters(size)},
			{"one-char", strings.Repeat("a", size)},
			{"spaces", strings.Repeat(" ", size)},
			{"punct", strings.Repeat("!", size)},
			{"digits", strings.Repeat("7", size)},
			{"combining", "e" + strings.Repeat("\u0301", size/2)},
			{"marks-unordered", "a" + strings.Repeat("\u0301\u0316", size/4)},
		} {
			b.Run(fmt.Sprintf("%s/%dKiB", c.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(c.text)))
				for b.Loop() {
					tok.Count(c.text)
				}
			})
		}
	}
}

// BenchmarkLoad measures what Default costs the first time: decompressing
// the embedded Qwen3 tokenizer.json and parsing it into a ready Tokenizer;
// MB-heap is the heap one such Tokenizer keeps.
func BenchmarkLoad(b *testing.B) {
	load := func() *Tokenizer {
		zr, err := gzip.NewReader(bytes.NewReader(qwen3JSON))
		if err != nil {
			b.Fatal(err)
		}
		data, err := io.ReadAll(zr)
		if err != nil {
			b.Fatal(err)
		}
		tok, err := Parse(data)
		if err != nil {
			b.Fatal(err)
		}
		return tok
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	keep := load()
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
	runtime.KeepAlive(keep)
	for b.Loop() {
		load()
	}
	b.ReportMetric(kept, "MB-heap")
}

// TestSpeedVsLibrary times this package and Hugging Face's tokenizers on
// the same texts and chunks, single-threaded, in one run, and logs the
// ratios. Opt-in: TOKENIZER_SPEED=node (npm binding, cd bench/tokenizer &&
// npm install) or TOKENIZER_SPEED=python (python3 with tokenizers).
// TOKENIZER_SPEED_DIR keeps the texts (made from GOROOT) in a folder.
func TestSpeedVsLibrary(t *testing.T) {
	mode := os.Getenv("TOKENIZER_SPEED")
	if mode == "" {
		t.Skip("set TOKENIZER_SPEED=node or python to compare speed with the tokenizers library")
	}
	dir := os.Getenv("TOKENIZER_SPEED_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	paths := speedTexts(t, dir)
	names := []string{"prose", "code", "cjk"}
	var args []string
	for _, n := range names {
		args = append(args, paths[n])
	}
	var cmd *exec.Cmd
	switch mode {
	case "node":
		cmd = exec.Command("node", append([]string{"../../bench/tokenizer/speed.js"}, args...)...)
	case "python":
		cmd = exec.Command("python3", append([]string{"../../bench/tokenizer/speed.py"}, args...)...)
	default:
		t.Fatalf("TOKENIZER_SPEED=%q: want node or python", mode)
	}
	cmd.Env = append(os.Environ(), "RAYON_NUM_THREADS=1", "TOKENIZERS_PARALLELISM=false")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v: %s", cmd, err, stderr.String())
	}
	lib := map[string]float64{}
	libTokens := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var rec struct {
			File   string  `json:"file"`
			Tokens int     `json:"tokens"`
			MBs    float64 `json:"mb_s"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("%s: %q: %v", mode, l, err)
		}
		for _, n := range names {
			if paths[n] == rec.File {
				lib[n], libTokens[n] = rec.MBs, rec.Tokens
			}
		}
	}

	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	tok := mustDefault(t)
	for _, n := range names {
		raw, err := os.ReadFile(paths[n])
		if err != nil {
			t.Fatal(err)
		}
		parts := chunks(string(raw), 4096)
		tokens := 0
		for _, p := range parts {
			tokens += tok.Count(p)
		}
		if tokens != libTokens[n] {
			t.Errorf("%s: %d tokens here, %d in the library", n, tokens, libTokens[n])
		}
		passes := 0
		t0 := time.Now()
		var ids []int
		for time.Since(t0) < 3*time.Second {
			for _, p := range parts {
				ids = tok.AppendEncode(ids[:0], p)
			}
			passes++
		}
		mbs := float64(len(raw)) * float64(passes) / time.Since(t0).Seconds() / 1e6
		t.Logf("%-5s %7d bytes %6d tokens: Go %7.1f MB/s, tokenizers (%s) %6.2f MB/s, ratio %5.1f×",
			n, len(raw), tokens, mbs, mode, lib[n], mbs/lib[n])
	}
}
