package rehearsal_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPrepareAndScratchDir: a server's prepare command runs once it
// answers, in its environment ({scratch_dir} made for it and substituted),
// its output in the server's log; the bundle records the command; the
// folder is gone after the stop. A prepare that fails fails the server.
func TestPrepareAndScratchDir(t *testing.T) {
	server := simServer("prepared", "batching") +
		`    prepare: [[sh, -c, 'echo prepared HOME=$HOME && touch "$HOME/made-here"']]` + "\n" +
		`    env: {HOME: "{scratch_dir}"}` + "\n"
	// simServer's env line comes first; the second replaces it.
	server = strings.Replace(server, "    env: {HF_TOKEN: hf_supersecretvalue}\n", "", 1)
	r := newRun(t, model+"servers:\n"+server+"workload: {concurrencies: [1], repeats: 1, max_tokens: 4, timeout: 20s}\nmechanism_check: ~\n")
	out := r.do(t, context.Background())
	if len(out.Failed) > 0 {
		t.Fatalf("outcome: %+v", out)
	}
	s := out.Results.Servers[0]
	if len(s.Prepare) != 1 || s.Prepare[0][0] != "sh" {
		t.Errorf("bundle's prepare: %q", s.Prepare)
	}
	log := readFile(t, filepath.Join(r.dir, s.Log))
	m := regexp.MustCompile(`(?m)^prepared HOME=(\S+)$`).FindStringSubmatch(log)
	if m == nil || !strings.Contains(log, "==> rehearse: prepare sh -c") || !strings.Contains(log, "exited with status 0") {
		t.Fatalf("log lacks the prepare's output or markers:\n%s", log)
	}
	if !strings.Contains(filepath.Base(m[1]), "rehearse-prepared-0-") {
		t.Errorf("HOME was %s, not a scratch folder", m[1])
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("the scratch folder %s is still there after the stop (%v)", m[1], err)
	}
	readme := readFile(t, filepath.Join(r.dir, "README.md"))
	if !strings.Contains(readme, "prepared, once it answered, by `sh -c") {
		t.Errorf("README does not show the prepare command")
	}

	failing := strings.Replace(server, `'echo prepared HOME=$HOME && touch "$HOME/made-here"'`, `'echo no such model >&2; exit 3'`, 1)
	r = newRun(t, model+"servers:\n"+failing+"workload: {concurrencies: [1], repeats: 1, max_tokens: 4, timeout: 20s}\nmechanism_check: ~\n")
	out = r.do(t, context.Background())
	if len(out.Failed) != 1 || !strings.Contains(strings.Join(out.Results.Notes, "\n"), "exit status 3") {
		t.Fatalf("a failed prepare: outcome %+v, notes %q", out.Failed, out.Results.Notes)
	}
}
