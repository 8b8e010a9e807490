package drive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
)

// words counts space-separated words: a stand-in tokenizer.
type words struct{}

func (words) Count(s string) int { return len(strings.Fields(s)) }

// fakeServer streams `tokens` content chunks of "w " each `gap` apart, with
// usage, and counts the requests it received.
func fakeServer(t testing.TB, tokens int, gap time.Duration) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(rw)
		io.WriteString(rw, `data: {"choices":[{"delta":{"role":"assistant","content":""}}]}`+"\n\n")
		rc.Flush()
		for range tokens {
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return
			}
			io.WriteString(rw, `data: {"choices":[{"delta":{"content":"w "},"finish_reason":null}]}`+"\n\n")
			rc.Flush()
		}
		fmt.Fprintf(rw, `data: {"choices":[{"delta":{},"finish_reason":"length"}]}`+"\n\n")
		fmt.Fprintf(rw, `data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":%d}}`+"\n\n", tokens+1)
		io.WriteString(rw, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func testLoad() plan.Load {
	return plan.Load{Prompts: []string{"a", "b", "c"}, MaxTokens: 8, Timeout: 10 * time.Second}
}

func journal(t *testing.T) (*bundle.Journal, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), bundle.JournalFile)
	j, err := bundle.CreateJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	h := &bundle.Results{Servers: []bundle.Server{{Name: "s"}}}
	if err := j.WriteHeader(h); err != nil {
		t.Fatal(err)
	}
	return j, path
}

func TestClosedWave(t *testing.T) {
	srv, hits := fakeServer(t, 4, 5*time.Millisecond)
	j, path := journal(t)
	var events []Event
	d := New(Options{Sink: j, Counter: words{}, FirstWaveID: 7, Progress: func(e Event) { events = append(events, e) }})
	res, err := d.ClosedWave(context.Background(), Target{Name: "s", BaseURL: srv.URL, Model: "m", IncludeUsage: true},
		WaveSpec{Load: testLoad(), Kind: contract.KindRecorded, Concurrency: 8, Repeat: 2, Cold: true})
	if err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 8 || len(res.Records) != 8 {
		t.Fatalf("%d requests, %d records", hits.Load(), len(res.Records))
	}
	w := res.Wave
	if w.ID != 7 || w.Concurrency != 8 || w.Repeat != 2 || !w.Cold || w.Mode != contract.ModeClosed || w.Stopped != "" {
		t.Fatalf("wave %+v", w)
	}
	if _, err := time.Parse(time.RFC3339Nano, w.StartedAt); err != nil || !strings.HasSuffix(w.StartedAt, "Z") {
		t.Fatalf("started_at %q: %v", w.StartedAt, err)
	}
	if w.WallS != contract.WaveWallS(res.Records) || w.WallS < 0.02 {
		t.Fatalf("wall_s %v", w.WallS)
	}
	var lo, hi = res.Records[0].StartS, res.Records[0].StartS
	for i, r := range res.Records {
		if !r.OK || r.Client != i || r.Prompt != i%3 || r.Wave != 7 || r.Kind != contract.KindRecorded {
			t.Fatalf("record %d: %+v", i, r)
		}
		if r.OutputTokens != 4 || *r.UsageCompletionTokens != 5 || r.Text != "w w w w " {
			t.Fatalf("record %d: output %d usage %d text %q", i, r.OutputTokens, *r.UsageCompletionTokens, r.Text)
		}
		if r.StartS < 0 || *r.FirstContentS <= r.StartS || r.EndS < r.ChunkTimesS[3] || len(r.ChunkTimesS) != 4 {
			t.Fatalf("record %d times: %+v", i, r)
		}
		lo, hi = min(lo, r.StartS), max(hi, r.StartS)
	}
	if w.ReleaseSpreadS != hi-lo {
		t.Fatalf("release spread %v, want %v", w.ReleaseSpreadS, hi-lo)
	}
	if st := d.Stats(); st.Waves != 1 || st.ClientCPUS != w.ClientCPUS || st.WallS != w.WallS || st.MaxReleaseSpreadS != w.ReleaseSpreadS {
		t.Fatalf("stats %+v for wave %+v", st, w)
	}
	if len(events) != 10 || events[0].Kind != WaveReleased || events[9].Kind != WaveEnded || events[9].Done != 8 {
		t.Fatalf("events: %d, first %v last %+v", len(events), events[0].Kind, events[len(events)-1])
	}
	j.Close()
	back, err := bundle.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Waves) != 1 || back.Waves[0].WallS != w.WallS || len(back.Records) != 8 || back.Waves[0].ReleaseSpreadS != w.ReleaseSpreadS {
		t.Fatalf("journal gives %d waves %+v, %d records", len(back.Waves), back.Waves, len(back.Records))
	}
}

func TestClosedWaveUsageTokensWithoutCounter(t *testing.T) {
	srv, _ := fakeServer(t, 3, time.Millisecond)
	d := New(Options{})
	res, err := d.ClosedWave(context.Background(), Target{Name: "s", BaseURL: srv.URL, IncludeUsage: true},
		WaveSpec{Load: testLoad(), Kind: contract.KindWarmup, Concurrency: 2, Repeat: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Records {
		if r.OutputTokens != 4 || r.Kind != contract.KindWarmup {
			t.Fatalf("output_tokens %d (usage says 4), kind %s", r.OutputTokens, r.Kind)
		}
	}
}

func TestClosedWaveCanceled(t *testing.T) {
	srv, _ := fakeServer(t, 1000, 5*time.Millisecond)
	j, path := journal(t)
	d := New(Options{Sink: j})
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(150*time.Millisecond, func() { cancel(errors.New("interrupt")) })
	load := testLoad()
	load.MaxTokens = 1000 // what the server streams: fewer would be an overrun the client cuts
	res, err := d.ClosedWave(ctx, Target{Name: "s", BaseURL: srv.URL}, WaveSpec{Load: load, Kind: contract.KindRecorded, Concurrency: 4, Repeat: 1})
	if err == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupt") {
		t.Fatalf("error %v", err)
	}
	if res.Wave.Stopped != "canceled: interrupt" || len(res.Records) != 4 {
		t.Fatalf("stopped %q, %d records", res.Wave.Stopped, len(res.Records))
	}
	for _, r := range res.Records {
		if r.OK || r.ErrorKind != contract.ErrCanceled || r.FirstContentS == nil || r.Text == "" {
			t.Fatalf("record %+v", r)
		}
	}
	j.Close()
	back, err := bundle.ReadJournal(path)
	if err != nil || back.Waves[0].Stopped == "" || len(back.Records) != 4 {
		t.Fatalf("journal: %v %+v", err, back)
	}
}

func TestClosedWaveConnectFailuresAreRecorded(t *testing.T) {
	srv, _ := fakeServer(t, 1, 0)
	url := srv.URL
	srv.Close()
	res, err := New(Options{}).ClosedWave(context.Background(), Target{Name: "s", BaseURL: url},
		WaveSpec{Load: testLoad(), Kind: contract.KindRecorded, Concurrency: 3, Repeat: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Records {
		if r.ErrorKind != contract.ErrConnect {
			t.Fatalf("%+v", r)
		}
	}
}

func TestWaveSpecErrors(t *testing.T) {
	d := New(Options{})
	tg := Target{Name: "s", BaseURL: "http://127.0.0.1:1"}
	cases := []struct {
		spec WaveSpec
		want string
	}{
		{WaveSpec{Load: testLoad(), Kind: contract.KindRecorded}, "concurrency 0"},
		{WaveSpec{Load: plan.Load{MaxTokens: 1}, Kind: contract.KindRecorded, Concurrency: 1}, "no prompts"},
		{WaveSpec{Load: plan.Load{Prompts: []string{"a"}}, Kind: contract.KindRecorded, Concurrency: 1}, "max_tokens 0"},
		{WaveSpec{Load: testLoad(), Kind: "bogus", Concurrency: 1}, `kind "bogus"`},
	}
	for _, c := range cases {
		if _, err := d.ClosedWave(context.Background(), tg, c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.spec, err, c.want)
		}
	}
	if _, err := d.ClosedWave(context.Background(), Target{Name: "s", BaseURL: "localhost:80"}, WaveSpec{Load: testLoad(), Kind: contract.KindRecorded, Concurrency: 1}); err == nil || !strings.Contains(err.Error(), "base URL") {
		t.Errorf("bad base URL: %v", err)
	}
}

// runPlan runs the planned waves of server s one by one, as package
// rehearsal walks them.
func runPlan(d *Driver, tg Target, wl plan.Workload) error {
	for _, w := range plan.Server(wl, tg.Name) {
		if _, err := d.Wave(context.Background(), tg, wl.Load, w); err != nil {
			return err
		}
	}
	return nil
}

// TestPlannedWaves runs a plan's waves with Wave: closed waves with their
// cold flag, open waves with their per-repeat seeds, warm-up waves at their
// concurrency.
func TestPlannedWaves(t *testing.T) {
	srv, hits := fakeServer(t, 2, time.Millisecond)
	j, path := journal(t)
	d := New(Options{Sink: j, Counter: words{}})
	wl := plan.Workload{Concurrencies: []int{1, 3}, Repeats: 2, Load: plan.Load{Prompts: []string{"p"}, MaxTokens: 4, Timeout: 5 * time.Second},
		Open: &plan.OpenLoop{RequestRatesRPS: []float64{200}, Arrival: "poisson", Seed: 9, NumRequests: 5}}
	if err := runPlan(d, Target{Name: "s", BaseURL: srv.URL}, wl); err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 2*1+2*3+2*5 {
		t.Fatalf("%d requests", hits.Load())
	}
	j.Close()
	res, err := bundle.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range res.Waves {
		got = append(got, fmt.Sprintf("%d:%s/%s c%d r%d cold=%v seed=%d", w.ID, w.Kind, w.Mode, w.Concurrency, w.Repeat, w.Cold, w.Seed))
	}
	want := []string{
		"1:recorded/closed c1 r1 cold=true seed=0", "2:recorded/closed c1 r2 cold=false seed=0",
		"3:recorded/closed c3 r1 cold=false seed=0", "4:recorded/closed c3 r2 cold=false seed=0",
		"5:recorded/open c0 r1 cold=false seed=9", "6:recorded/open c0 r2 cold=false seed=10",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("waves\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(res.Aggregates) != 3 || res.Aggregates[2].Mode != contract.ModeOpen || res.Aggregates[2].Lateness == nil {
		t.Fatalf("aggregates %+v", res.Aggregates)
	}

	wl.WarmupWaves = 2
	wl.WarmupConcurrency = 2
	wl.Open = nil
	j2, path2 := journal(t)
	if err := runPlan(New(Options{Sink: j2}), Target{Name: "s", BaseURL: srv.URL}, wl); err != nil {
		t.Fatal(err)
	}
	j2.Close()
	res, _ = bundle.ReadJournal(path2)
	for i, w := range res.Waves {
		warm := i < 2
		if (w.Kind == contract.KindWarmup) != warm || w.Cold || (warm && w.Concurrency != 2) {
			t.Fatalf("with warm-up, wave %d: %+v", i, w)
		}
	}
}

// A redirect is the outcome of a wave's request unless the target follows
// redirects.
func TestTargetFollowsRedirectsOnlyWhenAsked(t *testing.T) {
	srv, n := fakeServer(t, 2, time.Millisecond)
	redirect := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		http.Redirect(rw, r, srv.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	for _, follow := range []bool{false, true} {
		d := New(Options{Counter: words{}})
		res, err := d.ClosedWave(context.Background(), Target{Name: "s", BaseURL: redirect.URL, FollowRedirects: follow},
			WaveSpec{Load: testLoad(), Kind: contract.KindRecorded, Concurrency: 2, Repeat: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Records {
			if follow != r.OK || (!follow && (r.ErrorKind != contract.ErrHTTPStatus || r.HTTPStatus != 307)) {
				t.Fatalf("follow %v: ok=%v %q %d %q", follow, r.OK, r.ErrorKind, r.HTTPStatus, r.Error)
			}
		}
	}
	if n.Load() != 2 {
		t.Fatalf("the server redirected to got %d requests, want the 2 that followed", n.Load())
	}
}

// A wave builds only the requests of the prompts it sends: request i sends
// prompt i mod len(prompts), and a 3-request wave of a 10-prompt workload
// builds 3 bodies, a 25-request wave all 10.
func TestPrepareBuildsOnlyThePromptsAWaveSends(t *testing.T) {
	l := testLoad()
	l.Prompts = make([]string, 10)
	for i := range l.Prompts {
		l.Prompts[i] = fmt.Sprintf("prompt %d", i)
	}
	for _, tc := range []struct{ requests, want int }{{3, 3}, {10, 10}, {25, 10}, {0, 1}} {
		got, err := prepare(Target{Name: "s", BaseURL: "http://127.0.0.1:1"}, l, tc.requests)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.want {
			t.Errorf("%d requests: %d bodies built, want %d", tc.requests, len(got), tc.want)
		}
		for i, p := range got {
			if want := fmt.Sprintf("prompt %d", i); !strings.Contains(string(p.Body()), want) {
				t.Errorf("%d requests: body %d does not send %q", tc.requests, i, want)
			}
		}
	}
}
