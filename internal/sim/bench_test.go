package sim

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/sim/engine"
)

// BenchmarkConcurrentStreams measures how many streamed chunks per second
// the simulator serves over loopback when streams concurrent requests
// (128 tokens each, ignore_eos) arrive together, with the batching engine
// capped at that many sequences. The client reads every line of every
// stream on the same machine, so the figure is for simulator and client
// together. wall/schedule is the wave's wall time over the time the
// engine's simulated schedule gives it (1 when the host keeps up), and
// slip_s/op the simulated seconds the engine itself fell behind by more
// than it could catch up. At time scale 1000 the schedule asks for far more
// than the host can give: chunks/s is then the capacity. At time scale 10
// (the demo's) the wave is the seed's 64 clients.
func BenchmarkConcurrentStreams(b *testing.B) {
	for _, tc := range []struct {
		streams int
		scale   float64
	}{{64, 10}, {256, 1000}, {1024, 1000}} {
		b.Run(fmt.Sprintf("streams=%d/scale=%g", tc.streams, tc.scale), func(b *testing.B) {
			s, err := New(Options{Engine: engine.Batching, TimeScale: tc.scale, MaxNumSeqs: tc.streams})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ts := httptest.NewServer(s.Handler())
			defer ts.Close()
			client := &http.Client{Transport: &http.Transport{
				MaxIdleConnsPerHost: tc.streams,
				DialContext:         (&net.Dialer{}).DialContext,
			}}
			body := func(i int) string {
				return fmt.Sprintf(`{"messages":[{"role":"user","content":"stream %d"}],"max_tokens":128,"ignore_eos":true,"stream":true}`, i)
			}
			var chunks, waves int
			var wallS, schedS float64
			slip0 := s.engine.Metrics().SlipS
			start := time.Now()
			for b.Loop() {
				waveStart, simStart := time.Now(), s.clk.Now()
				var wg sync.WaitGroup
				counts := make([]int, tc.streams)
				for i := range tc.streams {
					wg.Go(func() {
						resp, err := client.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(body(i)))
						if err != nil {
							b.Error(err)
							return
						}
						defer resp.Body.Close()
						counts[i] = countContentChunks(resp.Body)
					})
				}
				wg.Wait()
				for _, c := range counts {
					if c != 128 {
						b.Fatalf("a stream had %d content chunks, want 128", c)
					}
					chunks += c
				}
				waves++
				wallS += time.Since(waveStart).Seconds()
				schedS += (s.engine.Metrics().LastStepS - simStart) / tc.scale
			}
			elapsed := time.Since(start).Seconds()
			b.ReportMetric(float64(chunks)/elapsed, "chunks/s")
			b.ReportMetric((s.engine.Metrics().SlipS-slip0)/float64(waves), "slip_s/op")
			b.ReportMetric(wallS/schedS, "wall/schedule")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func countContentChunks(r io.Reader) int {
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), []byte(`"delta":{"content":"`)) && !bytes.Contains(sc.Bytes(), []byte(`"content":""`)) {
			n++
		}
	}
	return n
}
