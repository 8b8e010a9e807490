package validate

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/sim/fit"
)

// TestServers: without --server every server with the engine its launch
// argv names, in the bundle's order; with flags the ones named; every
// refusal is a *fit.UsageError naming what to pass.
func TestServers(t *testing.T) {
	res := &bundle.Results{Servers: []bundle.Server{
		{Name: "naive", LaunchArgv: []string{"rehearse", "sim", "--engine", "serial"}},
		{Name: "batching", LaunchArgv: []string{"rehearse", "sim", "--engine=batching"}},
	}}
	got, err := Servers(res, nil)
	if want := []Server{{"naive", engine.Serial}, {"batching", engine.Batching}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("every server: %v, %v; want %v", got, err, want)
	}
	got, err = Servers(res, []string{"batching=serial"})
	if want := []Server{{"batching", engine.Serial}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("--server batching=serial: %v, %v; want %v", got, err, want)
	}
	real := &bundle.Results{Servers: []bundle.Server{{Name: "vllm", LaunchArgv: []string{"vllm", "serve", "m"}}}}
	for _, tc := range []struct {
		res   *bundle.Results
		flags []string
		want  string
	}{
		{real, nil, "server vllm: its launch argv names no simulated engine; pass --server vllm=serial or --server vllm=batching"},
		{res, []string{"naive"}, `--server "naive": want NAME=serial or NAME=batching`},
		{res, []string{"=serial"}, `--server "=serial": want NAME=serial or NAME=batching`},
		{res, []string{"naive=turbo"}, `--server "naive=turbo": want NAME=serial or NAME=batching`},
		{res, []string{"x=serial"}, `--server "x=serial": the bundle has no server x (have: naive, batching)`},
		{res, []string{"naive=serial", "naive=batching"}, `--server "naive=batching": server naive is named twice`},
	} {
		_, err := Servers(tc.res, tc.flags)
		if _, ok := errors.AsType[*fit.UsageError](err); !ok || err.Error() != "sim validate: "+tc.want {
			t.Errorf("%v: %v; want a *fit.UsageError %q", tc.flags, err, tc.want)
		}
	}
}

// TestCommand: the live bundle records the command line with the loads as
// given, the held-out bundle, --fit-jitter and the time scale.
func TestCommand(t *testing.T) {
	o := Options{Bundle: "b", HoldBundle: "h", FitOn: "1,64", HoldOut: "sustained", Jitter: true, TimeScale: 12.5}
	want := "rehearse sim validate b --fit-on 1,64 --hold-out sustained --hold-out-bundle h --fit-jitter --time-scale 12.5"
	if got := strings.Join(o.command(), " "); got != want {
		t.Errorf("command %q, want %q", got, want)
	}
}
