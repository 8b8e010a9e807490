package coordinate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/rehearse/rehearse/internal/plan"
)

// Client is worker Worker of Count's link to the coordinator at URL.
type Client struct {
	URL           string
	Worker, Count int
	// Token is the coordinator's shared token (TokenEnv), sent with every
	// request ("": none).
	Token string
	// Digest is the worker's plan digest (rehearsal.PlanDigest): the coordinator
	// refuses workers of another plan.
	Digest string
	// HTTP sends the requests (nil: a client without a timeout; each
	// request is bounded by its context and the coordinator's barrier
	// timeout).
	HTTP *http.Client
	// BarrierTimeout bounds one wait at a barrier on this side too (0: no
	// bound beyond the coordinator's).
	BarrierTimeout time.Duration
	// StartAt, when set, asks that the first wave be released at this
	// instant at the earliest (--start-at).
	StartAt time.Time

	// WaveSamples is how many samples of the coordinator's clock Release
	// takes at each barrier to measure the offset afresh (0:
	// DefaultWaveSamples; negative: none, the last offset is kept).
	WaveSamples int

	// Offset is the coordinator's clock minus this one's, and Uncertainty
	// the half round trip of the sample that measured it (Measure; each
	// Release measures them again).
	Offset, Uncertainty time.Duration
}

// DefaultWaveSamples is how many samples of the coordinator's clock a
// worker takes at each wave's barrier: a few round trips on a local
// network, so clock drift over a long plan is followed wave by wave.
const DefaultWaveSamples = 4

// Measure takes samples of the coordinator's clock and keeps the one of
// least round trip (NTP-style): offset = server time − (t0 + t1) / 2,
// uncertainty = round trip / 2.
func (c *Client) Measure(ctx context.Context, samples int) error {
	off, unc, err := c.measure(ctx, samples)
	if err != nil {
		return err
	}
	c.Offset, c.Uncertainty = off, unc
	return nil
}

// MeasureWaiting is Measure, tried again every half second for up to wait
// while the coordinator cannot be reached (a worker may start before it
// serves), but not once it refused the token, nor once ctx ended.
func (c *Client) MeasureWaiting(ctx context.Context, samples int, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := c.Measure(ctx, samples)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) || errors.Is(err, ErrUnauthorized) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (c *Client) measure(ctx context.Context, samples int) (offset, uncertainty time.Duration, err error) {
	best := time.Duration(-1)
	for range max(samples, 1) {
		t0 := time.Now()
		var tr TimeReply
		if err := c.call(ctx, http.MethodGet, TimePath, nil, &tr); err != nil {
			return 0, 0, fmt.Errorf("coordinator %s: clock offset: %w", c.URL, err)
		}
		t1 := time.Now()
		rtt := t1.Sub(t0)
		if best >= 0 && rtt >= best {
			continue
		}
		best = rtt
		mid := t0.Add(rtt / 2)
		offset = time.Unix(0, tr.UnixNano).Sub(mid.Round(0))
		uncertainty = rtt / 2
	}
	return offset, uncertainty, nil
}

// Local is the coordinator's instant at on this process's clock, with a
// monotonic reading (it is waited for).
func (c *Client) Local(at time.Time) time.Time {
	now := time.Now()
	return now.Add(at.Sub(now.Round(0).Add(c.Offset)))
}

// Release measures the clock offset afresh (WaveSamples samples), posts
// "ready for wave seq" and waits for the barrier: it returns the release
// instant on this clock (by the fresh offset) and as the coordinator
// wrote it, with the offset and its uncertainty.
func (c *Client) Release(ctx context.Context, seq int) (plan.Release, error) {
	if n := c.WaveSamples; n >= 0 {
		if n == 0 {
			n = DefaultWaveSamples
		}
		off, unc, err := c.measure(ctx, n)
		if err != nil {
			return plan.Release{}, fmt.Errorf("wave %d: %w", seq, err)
		}
		c.Offset, c.Uncertainty = off, unc
	}
	if c.BarrierTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.BarrierTimeout)
		defer cancel()
	}
	var br BarrierReply
	req := BarrierRequest{Worker: c.Worker, Count: c.Count, Wave: seq, Digest: c.Digest}
	if seq == 0 && !c.StartAt.IsZero() {
		req.StartAt = c.StartAt.UTC().Format(time.RFC3339Nano)
	}
	err := c.call(ctx, http.MethodPost, BarrierPath, req, &br)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && c.BarrierTimeout > 0 {
			err = fmt.Errorf("the other workers did not reach it within %v", c.BarrierTimeout)
		}
		return plan.Release{}, fmt.Errorf("coordinator %s: barrier of wave %d: %w", c.URL, seq, err)
	}
	return plan.Release{At: c.Local(time.Unix(0, br.UnixNano)), Stamp: br.ReleaseAt, Measured: true, Offset: c.Offset, Uncertainty: c.Uncertainty}, nil
}

// Done reports that this worker has walked its plan.
func (c *Client) Done(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, DonePath, DoneRequest{Worker: c.Worker}, nil)
}

func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.URL, "/")+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusUnauthorized {
		return ErrUnauthorized
	}
	if resp.StatusCode != http.StatusOK {
		var e errorReply
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return errors.New(e.Error)
		}
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// Fixed releases the first wave at At (this process's clock, no
// coordinator: rehearse run --segment i/N --start-at T for a plan of one
// wave); it has no later wave to release.
type Fixed struct{ At time.Time }

// Release returns At for the first wave.
func (f Fixed) Release(_ context.Context, seq int) (plan.Release, error) {
	if seq > 0 {
		return plan.Release{}, fmt.Errorf("wave %d: without a coordinator only one wave can be released together", seq)
	}
	now := time.Now()
	return plan.Release{At: now.Add(f.At.Sub(now.Round(0))), Stamp: f.At.UTC().Format(time.RFC3339Nano)}, nil
}
