package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestModelWriteRefusesBadInput: one line naming the flag, exit 2, no file.
func TestModelWriteRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "m.gguf")
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--layers", "0", "-o", out}, "--layers"},
		{[]string{"--heads", "5", "-o", out}, "--embd"},
		{[]string{"--kv-heads", "3", "-o", out}, "--kv-heads"},
		{[]string{"--arch", "gpt2", "-o", out}, "--arch"},
		{[]string{"--vocab", "1000", "-o", out}, "--vocab"},
		{[]string{"--type", "q4_0", "-o", out}, "--type"},
		{[]string{"--preset", "llama-70b", "-o", out}, "--preset"},
		{[]string{"--tokenizer", filepath.Join(dir, "none.json"), "-o", out}, "--tokenizer"},
		{[]string{"--tokenizer-config", filepath.Join(dir, "none.json"), "-o", out}, "--tokenizer-config"},
		{[]string{"-o", filepath.Join(dir, "no", "m.gguf")}, "--output"},
		{nil, "--output"},
	} {
		code, stdout, stderr := run(t, append([]string{"model", "write"}, c.args...)...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.flag) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and one line naming %s", c.args, code, stdout, stderr, c.flag)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused writes left %d files", len(entries))
	}
}

// TestModelWriteKeepsThePresetAndTheFlagsGiven: the flags given override
// the preset's fields, the rest stay.
func TestModelWriteKeepsThePresetAndTheFlagsGiven(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.gguf")
	code, stdout, stderr := run(t, "model", "write", "--layers", "1", "--embd", "16", "--heads", "2", "--kv-heads", "1",
		"--ffn", "32", "--tied=false", "--seed", "3", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := "qwen2, 1 layers, n_embd 16, 2 heads (1 kv), ffn 32, vocab 151669, tied false, F16, seed 3"
	if !strings.Contains(stderr, want) || !strings.Contains(stdout, "wrote "+out) {
		t.Fatalf("stderr %q, stdout %q; want %q and the file named", stderr, stdout, want)
	}
	st, err := os.Stat(out)
	if err != nil || !strings.Contains(stdout, "wrote "+out+": "+strconv.FormatInt(st.Size(), 10)+" bytes") {
		t.Fatalf("file %v (%v); stdout %q", st, err, stdout)
	}
}
