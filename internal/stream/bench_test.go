package stream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The benchmarks measure the client's own cost against a fast local server
// that runs in a child process (this test binary, re-executed), so that the
// client's CPU time (getrusage of this process) is the client's alone. Each
// content chunk carries the server's wall-clock send time in nanoseconds;
// the client's stamp minus it is the timestamp lateness: loopback, kernel
// and scheduling delay plus the client's own queueing.

const benchServerEnv = "REHEARSE_STREAM_BENCH_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(benchServerEnv) == "1" {
		serveBench()
		return
	}
	if os.Getenv(readModelEnv) == "1" {
		writeRounds()
		return
	}
	os.Exit(m.Run())
}

// serveBench streams k chunks per request, gap apart (0: as fast as the
// connection takes them), each flushed on its own.
func serveBench() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	http.Serve(ln, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		k, _ := strconv.Atoi(r.URL.Query().Get("k"))
		gap, _ := time.ParseDuration(r.URL.Query().Get("gap"))
		rw.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(rw)
		buf := make([]byte, 0, 128)
		next := time.Now()
		for range k {
			if gap > 0 {
				next = next.Add(gap)
				time.Sleep(time.Until(next))
			}
			buf = append(buf[:0], `data: {"choices":[{"index":0,"delta":{"content":"`...)
			buf = strconv.AppendInt(buf, time.Now().UnixNano(), 10)
			buf = append(buf, ` "},"finish_reason":null}]}`+"\n\n"...)
			if _, err := rw.Write(buf); err != nil {
				return
			}
			rc.Flush()
		}
		io.WriteString(rw, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`+"\n\ndata: [DONE]\n\n")
	}))
}

var benchSrv struct {
	once sync.Once
	addr string
	pid  int
	err  error
}

// procCPU is the CPU time of process pid from /proc/pid/stat (clock ticks
// of 10 ms), 0 where /proc cannot be read.
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func benchServerAddr(b *testing.B) string {
	benchSrv.once.Do(func() {
		exe, err := os.Executable()
		if err != nil {
			benchSrv.err = err
			return
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), benchServerEnv+"=1")
		out, err := cmd.StdoutPipe()
		if err != nil {
			benchSrv.err = err
			return
		}
		if err := cmd.Start(); err != nil {
			benchSrv.err = err
			return
		}
		// The child dies with the test binary's process group.
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || strings.HasPrefix(line, "error") {
			benchSrv.err = fmt.Errorf("bench server: %q %v", line, err)
			return
		}
		benchSrv.addr = strings.TrimSpace(line)
		benchSrv.pid = cmd.Process.Pid
	})
	if benchSrv.err != nil {
		b.Fatal(benchSrv.err)
	}
	return benchSrv.addr
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStreams runs waves of concurrent streams. unpaced: the server
// sends as fast as it can (client throughput). paced: one chunk per 20 ms
// per stream, like a server decoding at 50 tok/s per request (lateness
// under many streams).
func BenchmarkStreams(b *testing.B) {
	cases := []struct {
		streams, chunks int
		gap             time.Duration
	}{
		{1, 2000, 0},
		{64, 200, 0},
		{256, 100, 0},
		{256, 50, 20 * time.Millisecond},
		{1024, 50, 20 * time.Millisecond},
		{2048, 25, 20 * time.Millisecond},
	}
	for _, c := range cases {
		name := fmt.Sprintf("streams=%d/chunks=%d/gap=%v", c.streams, c.chunks, c.gap)
		b.Run(name, func(b *testing.B) {
			addr := benchServerAddr(b)
			client := NewClient(nil)
			defer client.Close()
			req := Request{
				BaseURL: "http://" + addr, Endpoint: fmt.Sprintf("/v1/chat/completions?k=%d&gap=%v", c.chunks, c.gap),
				Model: "m", Prompt: "p", MaxTokens: c.chunks, Timeout: time.Minute,
			}
			p, err := Prepare(req)
			if err != nil {
				b.Fatal(err)
			}
			var (
				chunks   int
				lateNS   []float64
				cpu      time.Duration
				srvCPU   time.Duration
				wall     time.Duration
				failures int
			)
			results := make([]Result, c.streams)
			for b.Loop() {
				if err := client.Warm(context.Background(), req.BaseURL, c.streams); err != nil {
					b.Fatal(err)
				}
				var wg sync.WaitGroup
				gate := make(chan struct{})
				for i := range c.streams {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-gate
						results[i] = client.Send(context.Background(), p)
					}()
				}
				cpu0, srv0, t0 := cpuNow(), procCPU(benchSrv.pid), time.Now()
				close(gate)
				wg.Wait()
				wall += time.Since(t0)
				cpu += cpuNow() - cpu0
				srvCPU += procCPU(benchSrv.pid) - srv0
				for _, r := range results {
					if !r.OK {
						failures++
						continue
					}
					chunks += len(r.ChunkTimes)
					for i, f := range strings.Fields(r.Text) {
						sent, err := strconv.ParseInt(f, 10, 64)
						if err != nil || i >= len(r.ChunkTimes) {
							b.Fatalf("chunk %d: %q", i, f)
						}
						lateNS = append(lateNS, float64(r.ChunkTimes[i].UnixNano()-sent))
					}
				}
			}
			if failures > 0 {
				b.Fatalf("%d streams failed", failures)
			}
			slices.Sort(lateNS)
			q := func(p float64) float64 { return lateNS[int(p*float64(len(lateNS)-1))] / 1e6 }
			b.ReportMetric(float64(chunks)/wall.Seconds(), "chunks/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(chunks)/1e3, "client-cpu-µs/chunk")
			b.ReportMetric(float64(srvCPU.Nanoseconds())/float64(chunks)/1e3, "server-cpu-µs/chunk")
			b.ReportMetric(wall.Seconds()/float64(b.N), "s/wave")
			b.ReportMetric(q(0.50), "late-p50-ms")
			b.ReportMetric(q(0.99), "late-p99-ms")
			b.ReportMetric(q(1), "late-max-ms")
		})
	}
}

// BenchmarkParseChunk is the client's per-chunk cost without the network:
// SSE decoding plus reading one vLLM-style content chunk.
func BenchmarkParseChunk(b *testing.B) {
	ev := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"Qwen/Qwen2.5-1.5B-Instruct","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	var (
		dec  Decoder
		st   state
		res  Result
		text strings.Builder
	)
	now := time.Now()
	emit := func(e Event) { st.handle(e, now, &res, &text) }
	b.SetBytes(int64(len(ev)))
	for b.Loop() {
		dec.Feed(ev, emit)
		if len(res.ChunkTimes) > 4096 {
			res.ChunkTimes = res.ChunkTimes[:0]
			text.Reset()
			st.generated, st.textLen = 0, 0
		}
	}
	if st.fail != "" {
		b.Fatal(st.failMsg)
	}
}
