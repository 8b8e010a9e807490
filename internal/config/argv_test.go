package config

import (
	"slices"
	"testing"

	"github.com/rehearse/rehearse/internal/secret"
)

// TestShownArgvNamesRehearse: {rehearse} executes the real path but is
// shown as "rehearse", and secrets are redacted in what is shown only.
func TestShownArgvNamesRehearse(t *testing.T) {
	r := &Rehearsal{Model: Model{ID: "Qwen/Qwen2.5-1.5B-Instruct"}}
	s := Server{Launch: []string{"{rehearse}", "sim", "--model", "{model}", "--port", "{port}", "--api-key", "sk-1"}}
	exe := "/root/.cache/go-build/12/34/exe/rehearse"
	if got, want := r.Argv(s, 8123, exe), []string{exe, "sim", "--model", "Qwen/Qwen2.5-1.5B-Instruct", "--port", "8123", "--api-key", "sk-1"}; !slices.Equal(got, want) {
		t.Errorf("Argv = %q, want %q", got, want)
	}
	if got, want := r.ShownArgv(s, 8123), []string{"rehearse", "sim", "--model", "Qwen/Qwen2.5-1.5B-Instruct", "--port", "8123", "--api-key", secret.Redacted}; !slices.Equal(got, want) {
		t.Errorf("ShownArgv = %q, want %q", got, want)
	}
}
