// Command bundle synthesizes rehearse bundles of 10 k, 100 k and 1 M
// records and measures, for each, the wall time and peak RSS of
// `rehearse verify`, `rehearse report`, `rehearse compare A A` and
// `rehearse merge`, each run as a child process (peak RSS from its
// getrusage), and the sizes of the files the report writes.
//
//	go build -o /tmp/rehearse ./cmd/rehearse
//	go run ./bench/bundle -rehearse /tmp/rehearse -dir /tmp/bundles -n 10000,100000,1000000
//
// A synthesized bundle is what a rehearsal writes: a journal, results.json
// decoded from it with its aggregates recomputed, and SHA256SUMS. Each
// record has 128 chunk times and a text of about 600 bytes whose
// output_tokens the embedded tokenizer counts (provenance
// output_tokens_source tokenizer), so verify re-counts every text.
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

func main() {
	bin := flag.String("rehearse", "rehearse", "the rehearse binary to measure")
	dir := flag.String("dir", filepath.Join(os.TempDir(), "bench-bundle"), "folder for the synthesized bundles (emptied first)")
	sizes := flag.String("n", "10000,100000,1000000", "record counts, comma-separated")
	genOnly := flag.Bool("gen", false, "only synthesize the bundles")
	reuse := flag.Bool("reuse", false, "reuse the bundles a previous run synthesized in -dir (what report and merge wrote is removed first)")
	recountOnly := flag.Bool("recount", false, "only measure the tokenizer re-count of the largest -n texts")
	cmds := flag.String("cmds", "verify,report,compare,merge", "the commands to measure, comma-separated")
	digits := flag.Int("time-digits", 9, "decimal places of the synthesized times: 9 (nanoseconds), as a rehearsal's records carry them; rounds 1 to 5 used 6")
	flag.Parse()
	if *digits < 0 || *digits > 9 {
		fmt.Fprintf(os.Stderr, "-time-digits %d: want 0 to 9\n", *digits)
		os.Exit(2)
	}
	timeScale = math.Pow10(*digits)
	only = map[string]bool{}
	for _, c := range strings.Split(*cmds, ",") {
		only[strings.TrimSpace(c)] = true
	}
	if *recountOnly {
		tok, err := tokenizer.Default()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/bundle:", err)
			os.Exit(1)
		}
		n, _ := strconv.Atoi((*sizes)[strings.LastIndex(*sizes, ",")+1:])
		recountRate(tok, textPool(tok, 4096), max(1, n))
		return
	}
	if err := run(*bin, *dir, *sizes, *genOnly, *reuse); err != nil {
		fmt.Fprintln(os.Stderr, "bench/bundle:", err)
		os.Exit(1)
	}
}

// only names the commands -cmds measures.
var only map[string]bool

func run(bin, dir, sizes string, genOnly, reuse bool) error {
	var ns []int
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-n: %q is not a record count", s)
		}
		ns = append(ns, n)
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return err
	}
	texts := textPool(tok, 4096)
	if !reuse {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	fmt.Println("| records | command | wall s | CPU s | peak RSS MB |")
	fmt.Println("|---:|---|---:|---:|---:|")
	var sizesOut []string
	for _, n := range ns {
		a := filepath.Join(dir, fmt.Sprintf("n%d", n))
		part := filepath.Join(dir, fmt.Sprintf("n%d-part", n))
		merged := filepath.Join(dir, fmt.Sprintf("n%d-merged", n))
		if err := os.RemoveAll(merged); err != nil {
			return err
		}
		if reuse {
			if err := strip(a); err != nil {
				return err
			}
		} else {
			if err := synthesize(a, n, []string{"naive", "batching"}, texts); err != nil {
				return err
			}
			if err := synthesize(part, 1000, []string{"other"}, texts); err != nil {
				return err
			}
		}
		if genOnly {
			continue
		}
		results, _ := os.Stat(filepath.Join(a, bundle.ResultsFile))
		journal, _ := os.Stat(filepath.Join(a, bundle.JournalFile))
		steps := []struct {
			name string
			args []string
		}{
			{"verify", []string{"verify", a}},
			{"report", []string{"report", a}},
			{"compare A A", []string{"compare", a, a}},
			{"merge (+1 k part)", []string{"merge", "--baseline", "naive", "-o", merged, a, part}},
		}
		for _, s := range steps {
			if !only[s.args[0]] {
				continue
			}
			m := measure(bin, s.args)
			if m.err != "" {
				fmt.Printf("| %d | %s | failed: %s | | |\n", n, s.name, m.err)
				continue
			}
			fmt.Printf("| %d | %s | %.2f | %.2f | %.0f |\n", n, s.name, m.wall.Seconds(), m.cpu.Seconds(), float64(m.rss)/1e6)
		}
		line := fmt.Sprintf("| %d | results.json %s | journal.jsonl %s |", n, mb(results.Size()), mb(journal.Size()))
		for _, f := range reportFiles(a) {
			line += fmt.Sprintf(" %s %s |", f.name, mb(f.size))
		}
		sizesOut = append(sizesOut, line)
	}
	fmt.Println()
	for _, l := range sizesOut {
		fmt.Println(l)
	}
	if !genOnly {
		fmt.Println()
		recountRate(tok, texts, ns[len(ns)-1])
	}
	return nil
}

// recountRate measures what verify's re-count of output_tokens costs apart
// from the rest: n texts of the pool counted on all cores as verify counts
// them. The pool's vocabulary is small and the tokenizer caches words, so
// this is a lower bound for model output; bench/tokenizer measures the
// tokenizer on varied text.
func recountRate(tok *tokenizer.Tokenizer, texts []counted, n int) {
	all := make([]string, n)
	bytes := 0
	for i := range all {
		all[i] = texts[i%len(texts)].text
		bytes += len(all[i])
	}
	d := countAll(tok, all)
	fmt.Printf("re-count of %d synthesized texts (%.0f MB) on %d cores: %.2f s (%.0f MB/s)\n", n, float64(bytes)/1e6, runtime.GOMAXPROCS(0), d.Seconds(), float64(bytes)/1e6/d.Seconds())
}

// countAll counts texts on all cores, each taking a contiguous share, as
// verify does.
func countAll(tok *tokenizer.Tokenizer, texts []string) time.Duration {
	workers := runtime.GOMAXPROCS(0)
	share := (len(texts) + workers - 1) / workers
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := min(len(texts), w*share), min(len(texts), (w+1)*share)
		wg.Go(func() {
			for _, t := range texts[lo:hi] {
				tok.Count(t)
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// strip removes from the bundle at dir everything but results.json and
// the journal, and writes its SHA256SUMS again: the bundle as synthesized.
func strip(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if n := e.Name(); n != bundle.ResultsFile && n != bundle.JournalFile {
			if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
				return err
			}
		}
	}
	return bundle.WriteSumsKnown(dir, nil)
}

func mb(n int64) string { return fmt.Sprintf("%.2f MB", float64(n)/1e6) }

type fileSize struct {
	name string
	size int64
}

// reportFiles are report.html and every SVG of the bundle at dir.
func reportFiles(dir string) []fileSize {
	var out []fileSize
	names, _ := filepath.Glob(filepath.Join(dir, "*.svg"))
	names = append([]string{filepath.Join(dir, "report.html")}, names...)
	for _, n := range names {
		if st, err := os.Stat(n); err == nil {
			out = append(out, fileSize{filepath.Base(n), st.Size()})
		}
	}
	return out
}

// measurement is one child process: wall time, CPU time (user + system),
// peak RSS in bytes (getrusage's ru_maxrss, KiB on Linux), or the first
// line of what it said when it failed.
type measurement struct {
	wall, cpu time.Duration
	rss       int64
	err       string
}

// measure runs bin with args.
func measure(bin string, args []string) measurement {
	cmd := exec.Command(bin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	m := measurement{wall: time.Since(start)}
	if err != nil {
		line, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
		m.err = fmt.Sprintf("%v: %s", err, line)
		return m
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		m.rss = ru.Maxrss * 1024
		m.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return m
}

// counted is a text and its token count under the embedded tokenizer.
type counted struct {
	text   string
	tokens int
}

// textPool makes n texts of about 600 bytes of English-like words, each
// counted with tok; records reuse them.
func textPool(tok *tokenizer.Tokenizer, n int) []counted {
	words := strings.Fields(`the model a server batch of tokens request latency
		cache key value attention layer prefill decode stream chunk queue GPU memory
		throughput time first token output input prompt reply schedule wave client
		load measure median percentile interval budget kernel thread core network
		packet frame window buffer result bundle record verify report figure table`)
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]counted, n)
	for i := range out {
		var b strings.Builder
		for b.Len() < 560+rng.IntN(80) {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			w := words[rng.IntN(len(words))]
			if rng.IntN(12) == 0 {
				w += "."
			}
			b.WriteString(w)
		}
		out[i] = counted{b.String(), tok.Count(b.String())}
	}
	return out
}

// synthesize writes a bundle of n records at dir: sustained closed-loop
// waves of the servers at concurrencies 16, 64 and 256, three repeats each, the records
// spread evenly over the waves, each client sending one request after
// another.
func synthesize(dir string, n int, servers []string, texts []counted) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := servers[0]
	h := &bundle.Results{
		Schema: bundle.Schema,
		Provenance: bundle.Provenance{
			Tool:               bundle.Tool{Name: "rehearse", Version: "v0.0.0-bench", Commit: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26"},
			StartedAt:          "2026-12-01T12:00:00Z",
			FinishedAt:         "2026-12-01T20:00:00Z",
			Host:               bundle.Host{Hostname: "bench", OS: "linux", Arch: "amd64", CPU: "bench", CPUs: 2, MemoryBytes: 8 << 30},
			GPUs:               []bundle.GPU{},
			Model:              bundle.Model{ID: "Qwen/Qwen3-0.6B"},
			Tokenizer:          bundle.Tokenizer{Name: "Qwen3 tokenizer.json", Source: "embedded", SHA256: tokenizer.EmbeddedSHA256},
			OutputTokensSource: bundle.SourceTokenizer,
		},
		Workload: bundle.Workload{
			Kind: "closed_loop", Concurrencies: []int{16, 64, 256}, Repeats: 3,
			Prompts:   []string{"Explain KV caching.", "Write a haiku about GPUs.", "Summarize the attention paper.", "List five prime numbers."},
			MaxTokens: 128, Temperature: 0, TimeoutS: 60, PercentileMethod: contract.PercentileMethod,
			Endpoint: "/v1/chat/completions", IncludeUsage: true,
			// Each client sends one request after another: sustained
			// waves, bounded by time (a closed wave sends one request per
			// client, and verify holds it to that).
			Sustained: &bundle.Sustained{DurationS: 3600},
		},
		Baseline: &base,
		Notes:    []string{"Synthetic bundle made by bench/bundle."},
	}
	for _, s := range servers {
		h.Servers = append(h.Servers, bundle.Server{Name: s, BaseURL: "http://127.0.0.1:8000"})
	}
	rng := rand.New(rand.NewPCG(uint64(n), uint64(len(servers))))
	anchor := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	nWaves := len(servers) * 3 * 3
	id, done := 0, 0
	for _, srv := range servers {
		for _, c := range h.Workload.Concurrencies {
			for rep := 0; rep < 3; rep++ {
				count := (n - done) / (nWaves - id)
				w := contract.Wave{ID: id, Server: srv, Concurrency: c, Repeat: rep, Kind: contract.KindRecorded, Mode: contract.ModeSustained,
					StartedAt: anchor.Add(time.Duration(id) * time.Minute).Format(time.RFC3339Nano)}
				free := make([]float64, c) // when each client is next free
				for i := 0; i < count; i++ {
					cl := i % c
					start := round(free[cl] + 0.001*rng.Float64())
					step := 0.01 * (1 + float64(c)/128) * (0.8 + 0.4*rng.Float64())
					first := round(start + 0.02 + 0.05*rng.Float64())
					chunks := make([]float64, 128)
					for k := range chunks {
						chunks[k] = round(first + step*float64(k))
					}
					end := chunks[len(chunks)-1]
					free[cl] = end
					t := texts[rng.IntN(len(texts))]
					u, p := t.tokens, 8
					fc := first
					r := contract.Record{Kind: w.Kind, Server: srv, Concurrency: c, Repeat: rep, Wave: id,
						Client: cl, Prompt: i % len(h.Workload.Prompts), StartS: start, FirstContentS: &fc, EndS: end,
						ChunkTimesS: chunks, Text: t.text, OutputTokens: t.tokens, OK: true, FinishReason: "length",
						UsageCompletionTokens: &u, UsagePromptTokens: &p}
					h.Records = append(h.Records, r)
				}
				w.WallS = contract.WaveWallS(h.Records[done:])
				w.ReleaseSpreadS = contract.WaveReleaseSpreadS(h.Records[done:])
				h.Waves = append(h.Waves, w)
				done += count
				id++
			}
		}
	}
	h.Recompute()
	if err := writeJournal(filepath.Join(dir, bundle.JournalFile), h); err != nil {
		return err
	}
	if err := bundle.WriteResults(dir, h); err != nil {
		return err
	}
	return bundle.WriteSumsKnown(dir, nil)
}

// writeJournal writes the journal a rehearsal of res would have written:
// its header, then each wave followed by its records.
func writeJournal(path string, res *bundle.Results) error {
	j, err := bundle.CreateJournal(path)
	if err != nil {
		return err
	}
	if err := j.WriteHeader(res); err != nil {
		return err
	}
	i := 0
	for _, w := range res.Waves {
		if err := j.WriteWave(contract.Wave{ID: w.ID, Server: w.Server, Concurrency: w.Concurrency, Repeat: w.Repeat,
			Kind: w.Kind, Mode: w.Mode, StartedAt: w.StartedAt}); err != nil { // at its release
			return err
		}
		for ; i < len(res.Records) && res.Records[i].Wave == w.ID; i++ {
			if err := j.WriteRecord(res.Records[i]); err != nil {
				return err
			}
		}
		if err := j.WriteWave(w); err != nil { // again at its end
			return err
		}
	}
	return j.Close()
}

// timeScale is 10^-time-digits seconds: the synthesized times' grain.
var timeScale = 1e9

func round(v float64) float64 {
	return float64(int64(v*timeScale+0.5)) / timeScale
}
