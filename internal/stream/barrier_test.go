package stream

import (
	"net"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestBarrierGates checks that every request has a gate, groups of
// ReleaseGroup share one, and Open lets every one go.
func TestBarrierGates(t *testing.T) {
	for _, n := range []int{0, 1, ReleaseGroup, ReleaseGroup + 1, 5*ReleaseGroup - 1} {
		b := NewBarrier(n)
		if want := max(1, (n+ReleaseGroup-1)/ReleaseGroup); len(b.gates) != want {
			t.Fatalf("n %d: %d gates, want %d", n, len(b.gates), want)
		}
		for i := range n {
			if b.Gate(i) != b.gates[i/ReleaseGroup] {
				t.Fatalf("n %d: request %d has another group's gate", n, i)
			}
		}
		b.Open()
		for i := range n {
			select {
			case <-b.Gate(i):
			default:
				t.Fatalf("n %d: request %d still waits after Open", n, i)
			}
		}
	}
}

// TestBarrierReadsBetweenGroups is why the barrier lets requests go in
// groups: on one P, a goroutine whose socket became readable while the
// requests are let go runs before the last group does, not after every
// request. Let go all at once, every request's goroutine is queued before
// it (the first check below shows the test tells the two apart).
func TestBarrierReadsBetweenGroups(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	run := func(staged bool) (readAt, lastGroupAt int) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		const n = 6 * ReleaseGroup
		var (
			mu    sync.Mutex
			order []int // a request's group, or -1: the read
			wg    sync.WaitGroup
		)
		note := func(v int) {
			mu.Lock()
			order = append(order, v)
			mu.Unlock()
		}
		wg.Add(1)
		go func() { // parks in the poller: nothing to read yet
			defer wg.Done()
			buf := make([]byte, 1)
			c.Read(buf)
			note(-1)
		}()
		b, all := NewBarrier(n), make(chan struct{})
		for i := range n {
			wg.Add(1)
			gate := b.Gate(i)
			if !staged {
				gate = all
			}
			go func() {
				defer wg.Done()
				<-gate
				// A request's write: a system call, as in the client.
				time.Sleep(0)
				note(i / ReleaseGroup)
			}()
		}
		time.Sleep(20 * time.Millisecond) // all of them parked
		s.Write([]byte{1})                // the response: readable now, its reader not yet woken
		if staged {
			b.Open()
		} else {
			close(all)
		}
		wg.Wait()
		readAt = slices.Index(order, -1)
		lastGroupAt = slices.Index(order, n/ReleaseGroup-1)
		return readAt, lastGroupAt
	}
	if r, l := run(false); r < l {
		t.Logf("let go at once, the read ran at %d, before the last group at %d: the monitor's poll came first", r, l)
	}
	for range 5 {
		if r, l := run(true); r > l {
			t.Fatalf("let go in groups, the read ran at %d, after the last group began at %d", r, l)
		}
	}
}
