package stream

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSoak holds 4,096 streams open at once against the child-process
// server of BenchmarkStreams (50 chunks each, 20 ms apart: about a second
// per stream) and reports the client's peak resident memory (VmHWM) and
// the most descriptors it held open, sampled every 10 ms. Run it with
//
//	go test -run '^$' -bench Soak -benchtime 1x ./internal/stream
func BenchmarkSoak(b *testing.B) {
	const streams, chunks = 4096, 50
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		b.Skip("needs /proc")
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < streams+64 {
		b.Skipf("the open-file limit %d is below %d streams and 64 spare (%v): raise it with ulimit -n", lim.Cur, streams, err)
	}
	addr := benchServerAddr(b)
	client := NewClient(nil)
	defer client.Close()
	p, err := Prepare(Request{
		BaseURL: "http://" + addr, Endpoint: fmt.Sprintf("/v1/chat/completions?k=%d&gap=20ms", chunks),
		Model: "m", Prompt: "p", MaxTokens: chunks, Timeout: 5 * time.Minute,
	})
	if err != nil {
		b.Fatal(err)
	}
	var peakFDs atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if n := openFDs(); n > peakFDs.Load() {
				peakFDs.Store(n)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	failures, got := 0, 0
	results := make([]Result, streams)
	start := time.Now()
	for b.Loop() {
		if err := client.Warm(context.Background(), "http://"+addr, streams); err != nil {
			b.Fatal(err)
		}
		release := make(chan struct{})
		var wg sync.WaitGroup
		for i := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = client.SendAt(context.Background(), p, release, nil)
			}()
		}
		close(release)
		wg.Wait()
		for _, r := range results {
			if !r.OK {
				failures++
				continue
			}
			got += len(r.ChunkTimes)
		}
	}
	wall := time.Since(start)
	close(stop)
	<-sampled
	if failures > 0 {
		b.Fatalf("%d of %d streams failed; the first: %s", failures, streams*b.N, firstFailure(results))
	}
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak-rss-MiB")
	b.ReportMetric(float64(peakFDs.Load()), "peak-fds")
	b.ReportMetric(float64(got)/wall.Seconds(), "chunks/s")
	b.ReportMetric(streams, "streams")
}

func firstFailure(rs []Result) string {
	for _, r := range rs {
		if !r.OK {
			return r.ErrorKind + ": " + r.Error
		}
	}
	return ""
}

// openFDs counts this process's open descriptors.
func openFDs() int64 {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return int64(len(entries))
}

// peakRSS is this process's peak resident set size in bytes (VmHWM).
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
