package bundle_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
)

// countdownCtx reports itself canceled from its n-th look on: a
// cancellation that lands while verify is inside a file, whatever the
// machine's speed.
type countdownCtx struct {
	context.Context
	left atomic.Int64
}

func (c *countdownCtx) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

func TestVerifyStopsWhileHashingALargeFile(t *testing.T) {
	dir := writeBundle(t, bundletest.SeedLike())
	// A sparse file as large as a bundle file may be: hashing it whole
	// takes tens of seconds, so only an interruption inside it returns
	// before the hang guard.
	big := filepath.Join(dir, "a-big.log")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, bundle.FileLimit.Bytes); err != nil {
		t.Skipf("no sparse file here: %v", err)
	}
	l, _ := os.OpenFile(filepath.Join(dir, bundle.SumsFile), os.O_APPEND|os.O_WRONLY, 0)
	l.WriteString("0000000000000000000000000000000000000000000000000000000000000000  a-big.log\n")
	l.Close()
	ctx := &countdownCtx{Context: context.Background()}
	ctx.left.Store(64) // a few looks before the file, then 1 MiB chunks of it
	type result struct {
		probs []bundle.Problem
		err   error
	}
	done := make(chan result, 1)
	go func() {
		probs, err := bundle.VerifyContext(ctx, dir)
		done <- result{probs, err}
	}()
	select {
	case r := <-done:
		if !bundle.IsInterrupted(ctx, r.err) {
			t.Errorf("VerifyContext canceled while hashing: %v (problems %v), want the interruption", r.err, r.probs)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("VerifyContext still hashing 20 s after its context was canceled")
	}
	// Canceled before it starts, it opens nothing.
	pre, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := bundle.VerifyContext(pre, dir); !bundle.IsInterrupted(pre, err) {
		t.Errorf("VerifyContext with a canceled context: %v", err)
	}
}
