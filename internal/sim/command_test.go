package sim

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/sim/engine"
)

// TestCommandRefusesBeforeListening: a setting out of range, a profile of
// another engine, or one New refuses is a *UsageError naming the flag, and
// nothing is logged (the server never listened).
func TestCommandRefusesBeforeListening(t *testing.T) {
	ok := Command{Engine: engine.Batching, Host: "127.0.0.1", TimeScale: 1, ReasoningField: ReasoningFieldReasoning}
	for _, tc := range []struct {
		edit func(*Command)
		want string
	}{
		{func(c *Command) { c.Engine = "turbo" }, `--engine "turbo": want serial or batching`},
		{func(c *Command) { c.Port = -1 }, "--port -1: want 0 to 65535"},
		{func(c *Command) { c.TimeScale = 2e6 }, "--time-scale 2e+06"},
		{func(c *Command) { c.Faults = []string{"boom:0.1"} }, `--fault: `},
		{func(c *Command) { c.Engine, c.EngineSet, c.Profile = engine.Serial, true, "t4-qwen2.5-1.5b-batching" }, "fitted for the batching engine"},
		{func(c *Command) { c.Engine, c.MaxNumSeqs = engine.Serial, 4 }, "max_num_seqs 4 is not 1"},
		{func(c *Command) { c.Tokenizer = "/nonexistent" }, "--tokenizer: "},
	} {
		c := ok
		tc.edit(&c)
		var stderr bytes.Buffer
		err := c.Serve(context.Background(), &stderr, func(int) { t.Error("exit called") })
		if !errors.As(err, new(*UsageError)) || !strings.Contains(err.Error(), tc.want) || stderr.Len() != 0 {
			t.Errorf("%+v: %v (stderr %q); want a *UsageError with %q and nothing logged", c, err, stderr.String(), tc.want)
		}
	}
}

// TestCommandEngineFollowsProfile: without --engine a profile's own engine
// is taken; with it, the two must agree.
func TestCommandEngineFollowsProfile(t *testing.T) {
	c := Command{Engine: engine.Batching, Profile: "t4-qwen2.5-1.5b-serial", TimeScale: 1, ReasoningField: ReasoningFieldReasoning}
	opts, err := c.options(context.Background())
	if err != nil || opts.Engine != engine.Serial || opts.Profile.Name != "t4-qwen2.5-1.5b-serial" {
		t.Errorf("no --engine: %v, engine %q", err, opts.Engine)
	}
	c.EngineSet = true
	if _, err := c.options(context.Background()); err == nil || !strings.Contains(err.Error(), "pass --engine serial or another profile") {
		t.Errorf("--engine batching with a serial profile: %v", err)
	}
}

// TestListProfiles: one line per built-in profile, its engine beside it.
func TestListProfiles(t *testing.T) {
	var b bytes.Buffer
	if err := ListProfiles(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(engine.ProfileNames()) || !strings.HasPrefix(lines[0], engine.ProfileNames()[0]+" ") {
		t.Errorf("%q", b.String())
	}
}
