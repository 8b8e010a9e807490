// Command client measures what the timing client costs and adds, against
// the asyncio peer, in one invocation. See README.md beside this file for
// the command and the figures.
//
//	go build -o bin/rehearse ./cmd/rehearse
//	go run ./bench/client -rehearse bin/rehearse -streams 256,1024,4096
//
// It starts `rehearse sim --stamp-sends` pinned to one CPU (taskset -c
// -sim-cpu), then for each stream count N runs the clients of -clients in
// turn, each a process of its own pinned to other CPUs (taskset -c
// -client-cpu):
//
//   - rehearse: this program re-executed in its client mode, which drives
//     internal/stream as rehearse's waves do (Client.Warm, then N requests
//     released together by a stream.Barrier, each Client.Send), over the
//     client's own HTTP/1.1 path (the default), each read stamped with
//     the kernel's receive time (SO_TIMESTAMPNS);
//   - rehearse-all: the same with every request let go at once, as
//     closed-loop waves were released before stream.Barrier;
//   - rehearse-read: the same path with each read stamped by time.Now
//     after it (REHEARSE_RXSTAMP=read), as before kernel stamps: what
//     the client's own queue adds when it stamps for itself;
//   - nethttp: the same over net/http (REHEARSE_HTTP=nethttp), the path
//     the own one replaced, for comparison;
//   - the peer: bench/peer/asyncio_peer.py (asyncio + aiohttp, one task
//     per request), in the design of `vllm bench serve`.
//
// Both send the same body, one closed-loop wave of N streams per repeat,
// and report their own CPU time over the wave (getrusage of their
// process), the content chunks they read, and the added latency of every
// stamped event: the client's receive stamp minus the simulator's send
// stamp (rehearse_sent_ns), both the host's wall clock.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rehearse/rehearse/internal/stream"
)

// wave is one client's figures for one wave, printed as one JSON line by
// either client.
type wave struct {
	Client        string   `json:"client"`
	Streams       int      `json:"requests"`
	OK            int      `json:"ok"`
	Chunks        int      `json:"chunks"`
	Stamped       int      `json:"stamped"`
	WallS         float64  `json:"wall_s"`
	CPUS          float64  `json:"cpu_s"`
	CPUPerChunkUS float64  `json:"cpu_us_per_chunk"`
	AddedP50S     *float64 `json:"added_p50_s"`
	AddedP99S     *float64 `json:"added_p99_s"`
	AddedMaxS     *float64 `json:"added_max_s"`
	// AddedFirstP99S is rehearse's added p99 over each stream's first
	// stamped event (the role chunk, which arrives with the response
	// headers and waits for net/http to hand the body over);
	// AddedRestP99S over every other stamped event.
	AddedFirstP99S *float64 `json:"added_first_p99_s,omitempty"`
	AddedRestP99S  *float64 `json:"added_rest_p99_s,omitempty"`
	// AddedTTFTP99S is rehearse's added p99 over each stream's first
	// content event (its second stamped one, after the role chunk): what
	// the client adds to the TTFT it records.
	AddedTTFTP99S *float64 `json:"added_ttft_p99_s,omitempty"`
	// LagP99S is rehearse's p99 over stamped events of how long after
	// its stamp of an event it parsed it (stream.Result.LagNS): its own
	// queue, outside the stamps where they are the kernel's.
	LagP99S    *float64 `json:"lag_p99_s,omitempty"`
	TTFTP50S   *float64 `json:"ttft_p50_s"`
	TTFTP95S   *float64 `json:"ttft_p95_s"`
	ErrorKinds []string `json:"error_kinds,omitempty"`
	// RunqueueWaitS is the time rehearse's threads spent runnable but
	// waiting for a CPU during the wave (/proc/self/task/*/schedstat),
	// summed over threads: CPU the client wanted and the machine, shared
	// with other work, did not give it. Absent for the peer.
	RunqueueWaitS *float64 `json:"runqueue_wait_s,omitempty"`
}

// prompt and model are the peer's body (bench/peer/asyncio_peer.py).
const prompt = "Tell me about the sea."
const model = "Qwen/Qwen2.5-1.5B-Instruct"

func main() {
	var (
		rehearse   = flag.String("rehearse", "bin/rehearse", "the rehearse binary that serves the simulator")
		streamsArg = flag.String("streams", "256,1024,4096", "comma-separated stream counts")
		maxTokens  = flag.Int("max-tokens", 64, "max_tokens of every request")
		repeats    = flag.Int("repeats", 2, "waves per client and stream count")
		timeScale  = flag.Float64("time-scale", 20, "the simulator's --time-scale")
		simCPU     = flag.String("sim-cpu", "0", "taskset CPU list of the simulator")
		clientCPU  = flag.String("client-cpu", "1", "taskset CPU list of each client")
		python     = flag.String("python", "/usr/bin/python3", "the Python with aiohttp (Debian's python3-aiohttp)")
		peer       = flag.String("peer", "bench/peer/asyncio_peer.py", "the asyncio peer")
		noPeer     = flag.Bool("no-peer", false, "leave the peer out of -clients")
		clientsArg = flag.String("clients", "rehearse,rehearse-read,nethttp,peer", "comma-separated clients to run: rehearse (the own HTTP/1.1 path, kernel receive stamps, released by stream.Barrier), rehearse-all (the same, every request released at once), rehearse-read (stamped after each read), nethttp (rehearse over net/http), peer (asyncio)")
		// Client mode (the re-executed child).
		clientRun  = flag.Int("client-run", 0, "internal: run rehearse's client mode with this many streams")
		baseURL    = flag.String("base-url", "", "internal: the simulator's URL (client mode)")
		cpuprofile = flag.String("cpuprofile", "", "write a CPU profile of rehearse's client at -profile-streams (the nethttp client's to this path + \".nethttp\")")
		profileAt  = flag.Int("profile-streams", 4096, "the stream count -cpuprofile profiles")
		releaseAll = flag.Bool("release-all", false, "internal: release every request at once (client mode, the rehearse-all client)")
	)
	flag.Parse()
	if *clientRun > 0 {
		if err := clientMode(*baseURL, *clientRun, *maxTokens, *repeats, *cpuprofile, *releaseAll); err != nil {
			fmt.Fprintln(os.Stderr, "client:", err)
			os.Exit(1)
		}
		return
	}
	var counts []int
	for _, f := range strings.Split(*streamsArg, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "-streams %q: want positive integers separated by commas\n", *streamsArg)
			os.Exit(2)
		}
		counts = append(counts, n)
	}
	var rl syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	for _, n := range counts {
		if uint64(n)+256 > rl.Cur {
			fmt.Fprintf(os.Stderr, "-streams %d: the file descriptor limit is %d (ulimit -n); each process needs one per stream and some\n", n, rl.Cur)
			os.Exit(2)
		}
	}
	var clients []string
	for _, f := range strings.Split(*clientsArg, ",") {
		switch f = strings.TrimSpace(f); f {
		case "rehearse", "rehearse-all", "rehearse-read", "nethttp", "peer":
			if f != "peer" || !*noPeer {
				clients = append(clients, f)
			}
		default:
			fmt.Fprintf(os.Stderr, "-clients %q: want rehearse, rehearse-all, rehearse-read, nethttp or peer, separated by commas\n", *clientsArg)
			os.Exit(2)
		}
	}
	if err := orchestrate(*rehearse, counts, *maxTokens, *repeats, *timeScale, *simCPU, *clientCPU, *python, *peer, clients, *cpuprofile, *profileAt); err != nil {
		fmt.Fprintln(os.Stderr, "bench/client:", err)
		os.Exit(1)
	}
}

// pinned prefixes argv with taskset -c cpus where taskset exists.
func pinned(cpus string, argv ...string) *exec.Cmd {
	if path, err := exec.LookPath("taskset"); err == nil && cpus != "" {
		argv = append([]string{path, "-c", cpus}, argv...)
	}
	return exec.Command(argv[0], argv[1:]...)
}

func orchestrate(rehearse string, counts []int, maxTokens, repeats int, timeScale float64, simCPU, clientCPU, python, peer string, clients []string, cpuprofile string, profileAt int) error {
	_, tasksetErr := exec.LookPath("taskset")
	largest := slices.Max(counts)
	portFile := filepath.Join(os.TempDir(), fmt.Sprintf("bench-client-port-%d", os.Getpid()))
	defer os.Remove(portFile)
	sim := pinned(simCPU, rehearse, "sim", "--port", "0", "--port-file", portFile, "--quiet", "--stamp-sends",
		"--engine", "batching", "--time-scale", fmt.Sprint(timeScale),
		"--max-num-seqs", fmt.Sprint(largest), "--kv-token-budget", fmt.Sprint(largest*(maxTokens+64)),
		// A client that opens thousands of connections before writing
		// on them (the peer) must not meet the 10 s rule for new ones.
		"--idle-timeout", "10m")
	sim.Stderr = os.Stderr
	if err := sim.Start(); err != nil {
		return fmt.Errorf("starting the simulator: %v", err)
	}
	defer func() {
		sim.Process.Signal(syscall.SIGTERM)
		sim.Wait()
	}()
	var port string
	for range 100 {
		if b, err := os.ReadFile(portFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			port = strings.TrimSpace(string(b))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if port == "" {
		return fmt.Errorf("the simulator wrote no port to %s", portFile)
	}
	url := "http://" + net.JoinHostPort("127.0.0.1", port)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	pin := fmt.Sprintf("simulator on CPU %s, each client on CPU %s", simCPU, clientCPU)
	if tasksetErr != nil {
		pin = "no taskset: nothing pinned"
	}
	fmt.Printf("# %s; max_tokens %d, %d wave(s) per client and count; %s\n", url, maxTokens, repeats, pin)
	var rows [][]wave
	for _, n := range counts {
		var row []wave
		for _, client := range clients {
			if client == "peer" {
				theirs, err := runLines(pinned(clientCPU, python, peer, "--base-url", url, "--clients", fmt.Sprint(n),
					"--max-tokens", fmt.Sprint(maxTokens), "--repeats", fmt.Sprint(repeats)), "peer")
				if err != nil {
					fmt.Printf("# the peer at %d streams: %v\n", n, err)
				}
				show(theirs)
				row = append(row, theirs...)
				continue
			}
			args := []string{self, "-client-run", fmt.Sprint(n), "-base-url", url, "-max-tokens", fmt.Sprint(maxTokens), "-repeats", fmt.Sprint(repeats)}
			if cpuprofile != "" && n == profileAt {
				path := cpuprofile
				if client != "rehearse" {
					path += "." + client
				}
				args = append(args, "-cpuprofile", path)
			}
			if client == "rehearse-all" {
				args = append(args, "-release-all")
			}
			cmd := pinned(clientCPU, args...)
			switch client {
			case "nethttp":
				cmd.Env = append(os.Environ(), "REHEARSE_HTTP=nethttp")
			case "rehearse-read":
				cmd.Env = append(os.Environ(), "REHEARSE_HTTP=h1", "REHEARSE_RXSTAMP=read")
			default:
				cmd.Env = append(os.Environ(), "REHEARSE_HTTP=h1")
			}
			ours, err := runLines(cmd, client)
			if err != nil {
				return fmt.Errorf("%s at %d streams: %v", client, n, err)
			}
			show(ours)
			row = append(row, ours...)
		}
		rows = append(rows, row)
	}
	fmt.Println()
	fmt.Println("| streams | client | ok | CPU per content chunk | added p50 | added p99 | added max | added TTFT p99 | p99 first event / rest | client lag p99 | TTFT p50 | client CPU ÷ wall | waiting for a CPU ÷ wall |")
	fmt.Println("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, row := range rows {
		for _, w := range row {
			split := "–"
			if w.AddedFirstP99S != nil {
				split = ms(w.AddedFirstP99S) + " / " + ms(w.AddedRestP99S)
			}
			waited := "–"
			if w.RunqueueWaitS != nil {
				waited = fmt.Sprintf("%.0f %%", 100**w.RunqueueWaitS/w.WallS)
			}
			fmt.Printf("| %d | %s | %d/%d | %.2f µs | %s | %s | %s | %s | %s | %s | %s | %.0f %% | %s |\n", w.Streams, w.Client, w.OK, w.Streams,
				w.CPUPerChunkUS, ms(w.AddedP50S), ms(w.AddedP99S), ms(w.AddedMaxS), ms(w.AddedTTFTP99S), split, ms(w.LagP99S), ms(w.TTFTP50S), 100*w.CPUS/w.WallS, waited)
		}
	}
	return nil
}

// show prints each wave's JSON line as it comes.
func show(ws []wave) {
	for _, w := range ws {
		line, _ := json.Marshal(w)
		fmt.Println("#", string(line))
	}
}

func ms(v *float64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f ms", *v*1000)
}

// runLines runs a client and decodes the JSON line of each of its waves.
func runLines(cmd *exec.Cmd, client string) ([]wave, error) {
	cmd.Stderr = os.Stderr
	out, err := cmd.Output() // the waves it finished are kept on failure
	var ws []wave
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var w wave
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			return nil, fmt.Errorf("line %q: %v", sc.Text(), err)
		}
		w.Client = client
		ws = append(ws, w)
	}
	return ws, err
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runqueueWait sums the run-queue wait of the process's threads
// (the second field of /proc/self/task/TID/schedstat, nanoseconds); -1
// where it cannot be read. A thread that exits between two readings takes
// its share with it, which only makes the figure smaller.
func runqueueWait() time.Duration {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return -1
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) >= 2 {
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}

// clientMode runs repeats closed-loop waves of n streams with rehearse's
// client and prints one JSON line per wave. The CPU time is the process's
// from the release to the last stream's end (connections are opened
// before, by Warm, as rehearse's closed-loop waves do).
func clientMode(url string, n, maxTokens, repeats int, cpuprofile string, releaseAll bool) error {
	p, err := stream.Prepare(stream.Request{BaseURL: url, Model: model, Prompt: prompt, MaxTokens: maxTokens, Timeout: 10 * time.Minute})
	if err != nil {
		return err
	}
	c := stream.NewClient(nil)
	defer c.Close()
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	results := make([]stream.Result, n)
	for range repeats {
		if err := c.Warm(context.Background(), url, n); err != nil {
			return err
		}
		var wg sync.WaitGroup
		// The release: rehearse's closed-loop waves' (stream.Barrier), or
		// every request at once (-release all, as before it).
		barrier, all := stream.NewBarrier(n), make(chan struct{})
		gate := func(i int) <-chan struct{} { return barrier.Gate(i) }
		if releaseAll {
			gate = func(int) <-chan struct{} { return all }
		}
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate(i)
				results[i] = c.Send(context.Background(), p)
			}()
		}
		time.Sleep(50 * time.Millisecond) // every goroutine parked at the release
		cpu0, t0, rq0 := cpuNow(), time.Now(), runqueueWait()
		if releaseAll {
			close(all)
		} else {
			go barrier.Open()
		}
		wg.Wait()
		w := wave{Streams: n, WallS: time.Since(t0).Seconds(), CPUS: (cpuNow() - cpu0).Seconds()}
		if rq0 >= 0 {
			v := (runqueueWait() - rq0).Seconds()
			w.RunqueueWaitS = &v
		}
		var added, first, rest, ttft, ttftAdded, lag []float64
		kinds := map[string]bool{}
		for _, r := range results {
			for j, d := range r.AddedNS {
				added = append(added, float64(d)/1e9)
				if j == 1 {
					ttftAdded = append(ttftAdded, float64(d)/1e9)
				}
				if j == 0 {
					first = append(first, float64(d)/1e9)
				} else {
					rest = append(rest, float64(d)/1e9)
				}
			}
			for _, d := range r.LagNS {
				lag = append(lag, float64(d)/1e9)
			}
			if !r.OK {
				kinds[r.ErrorKind] = true
				continue
			}
			w.OK++
			w.Chunks += len(r.ChunkTimes)
			if !r.FirstContent.IsZero() {
				ttft = append(ttft, r.FirstContent.Sub(r.Start).Seconds())
			}
		}
		for k := range kinds {
			w.ErrorKinds = append(w.ErrorKinds, k)
		}
		w.Stamped = len(added)
		if w.Chunks > 0 {
			w.CPUPerChunkUS = w.CPUS / float64(w.Chunks) * 1e6
		}
		slices.Sort(added)
		slices.Sort(ttft)
		slices.Sort(first)
		slices.Sort(rest)
		slices.Sort(ttftAdded)
		slices.Sort(lag)
		w.LagP99S = pct(lag, 0.99)
		w.AddedTTFTP99S = pct(ttftAdded, 0.99)
		w.AddedFirstP99S, w.AddedRestP99S = pct(first, 0.99), pct(rest, 0.99)
		w.AddedP50S, w.AddedP99S = pct(added, 0.5), pct(added, 0.99)
		if len(added) > 0 {
			w.AddedMaxS = &added[len(added)-1]
		}
		w.TTFTP50S, w.TTFTP95S = pct(ttft, 0.5), pct(ttft, 0.95)
		line, _ := json.Marshal(w)
		fmt.Println(string(line))
		clear(results)
	}
	return nil
}

// pct is the type 7 quantile of sorted, as the peer computes it.
func pct(sorted []float64, p float64) *float64 {
	if len(sorted) == 0 {
		return nil
	}
	k := float64(len(sorted)-1) * p
	lo := int(k)
	hi := min(lo+1, len(sorted)-1)
	v := sorted[lo] + (sorted[hi]-sorted[lo])*(k-float64(lo))
	return &v
}
