// Command sharegpt measures the peak memory of resolving a ShareGPT-sized
// file with the sharegpt prompt source: it writes a synthetic ShareGPT JSON
// file of -n conversations (≈ 90,000 and ≈ 600 MB by default) into a
// temporary directory, resolves it once as a rehearsal does, and prints the
// process's peak resident set (getrusage ru_maxrss) before and after, beside
// the file's size and the bytes of prompt text the resolved set keeps.
//
//	go run ./bench/sharegpt                    # first human turn only
//	go run ./bench/sharegpt -use-output-len    # also tokenizes every first reply
//
// The file is deleted on exit; nothing is written outside the temporary
// directory. See README.md beside this file for the figures.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/rehearse/rehearse/internal/tokenizer"
	"github.com/rehearse/rehearse/internal/workload"
)

func main() {
	n := flag.Int("n", 90000, "conversations to generate")
	useOutputLen := flag.Bool("use-output-len", false, "set max_tokens from each first reply (tokenizes every reply with the embedded Qwen2.5 tokenizer)")
	keep := flag.String("keep", "", "write the file here and keep it (default: a temporary directory, deleted)")
	flag.Parse()
	if err := run(*n, *useOutputLen, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "sharegpt:", err)
		os.Exit(1)
	}
}

func run(n int, useOutputLen bool, keep string) error {
	path := keep
	if path == "" {
		dir, err := os.MkdirTemp("", "sharegpt-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "sharegpt.json")
	}
	t0 := time.Now()
	size, err := generate(path, n)
	if err != nil {
		return err
	}
	fmt.Printf("file: %d conversations, %.1f MB, written in %.1f s\n", n, float64(size)/1e6, time.Since(t0).Seconds())
	env := workload.Env{}
	spec := workload.Spec{Source: workload.SourceShareGPT, Path: path, Dataset: &workload.Dataset{UseOutputLen: useOutputLen}}
	if useOutputLen {
		tok, err := tokenizer.Embedded("qwen2.5")
		if err != nil {
			return err
		}
		env.Tokenizer = tok
	}
	runtime.GC()
	before := maxRSS()
	fmt.Printf("peak RSS before resolving: %.1f MB\n", before/1e6)
	t1 := time.Now()
	set, err := workload.Resolve(spec, env)
	if err != nil {
		return err
	}
	el := time.Since(t1)
	kept := 0
	for _, p := range set.Prompts {
		kept += len(p.Text)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("resolved: %d prompts (%.1f MB of prompt text kept) in %.1f s (use_output_len %v)\n", len(set.Prompts), float64(kept)/1e6, el.Seconds(), useOutputLen)
	fmt.Printf("peak RSS after resolving: %.1f MB (%.0f%% of the file)\n", maxRSS()/1e6, 100*maxRSS()/float64(size))
	fmt.Printf("Go heap in use after resolving: %.1f MB\n", float64(ms.HeapInuse)/1e6)
	runtime.KeepAlive(set)
	return nil
}

// maxRSS is the process's peak resident set in bytes (Linux reports KiB).
func maxRSS() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) * 1024
}

// generate writes n ShareGPT conversations to path, streaming, and returns
// the file's size. Turn lengths are drawn to resemble ShareGPT_V3: 2 to 8
// turns, human turns of about 20 to 1,800 bytes, replies of 200 to 3,100,
// ≈ 6.6 kB a conversation; a few entries have no human turn.
func generate(path string, n int) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the of and to in is that for it as was with be by on not he this are or his from at which but have an they you were her she there one all we can their has been if more when will would who so no model server token request latency batch cache memory GPU throughput prompt reply conversation question answer explain why how what please write code function")
	text := func(minB, maxB int) string {
		want := minB + rng.IntN(maxB-minB+1)
		var b strings.Builder
		for b.Len() < want {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[rng.IntN(len(words))])
		}
		return b.String()
	}
	type turn struct {
		From  string `json:"from"`
		Value string `json:"value"`
	}
	type entry struct {
		ID            string `json:"id"`
		Conversations []turn `json:"conversations"`
	}
	w.WriteString("[\n")
	enc := json.NewEncoder(w)
	for i := range n {
		e := entry{ID: fmt.Sprintf("c%06d", i)}
		turns := 2 + 2*rng.IntN(4)
		for t := range turns {
			if t%2 == 0 {
				from := "human"
				if i%97 == 0 && t == 0 {
					from = "system" // an entry with no human turn first
				}
				e.Conversations = append(e.Conversations, turn{from, text(20, 1800)})
			} else {
				e.Conversations = append(e.Conversations, turn{"gpt", text(200, 3100)})
			}
		}
		if i > 0 {
			w.WriteString(",")
		}
		if err := enc.Encode(e); err != nil {
			return 0, err
		}
	}
	w.WriteString("]\n")
	if err := w.Flush(); err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), f.Close()
}
