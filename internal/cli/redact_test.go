package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// filesContaining lists every file under dir whose bytes contain s.
func filesContaining(t *testing.T, dir, s string) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), s) {
			hits = append(hits, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

// TestPasswordInBaseURLIsNeverWritten: bench's --base-url and a server's
// base_url may carry user:password; the requests use it (as basic auth),
// and no file of the bundle, no progress line and no error shows it.
func TestPasswordInBaseURLIsNeverWritten(t *testing.T) {
	srv, auth := benchServer(t, 3, time.Millisecond)
	withPassword := strings.Replace(srv.URL, "http://", "http://user:s3cret@", 1)
	check := func(what, dir, stdout, stderr string) {
		t.Helper()
		if dir != "" {
			if hits := filesContaining(t, dir, "s3cret"); len(hits) > 0 {
				t.Errorf("%s: the password is in %v", what, hits)
			}
		}
		if strings.Contains(stdout+stderr, "s3cret") {
			t.Errorf("%s: the password is in the output:\n%s\n%s", what, stdout, stderr)
		}
	}

	dir := filepath.Join(t.TempDir(), "bench")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", withPassword, "--concurrency", "2", "--repeats", "1",
		"--max-tokens", "3", "--tokenizer", "usage", "--progress", "always", "-o", dir)
	if code != 0 {
		t.Fatalf("bench: exit %d\n%s\n%s", code, out, errs)
	}
	if auth.Load() != "Basic dXNlcjpzM2NyZXQ=" {
		t.Errorf("the requests did not use the URL's credentials: authorization %q", auth.Load())
	}
	check("bench", dir, out, errs)

	file := filepath.Join(t.TempDir(), "r.yaml")
	yaml := "model: {id: test-model}\nservers:\n  - name: remote\n    base_url: " + withPassword + "\n" +
		"workload: {concurrencies: [2], repeats: 1, max_tokens: 3}\nmechanism_check: {concurrency: 2, period: 5ms}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(t.TempDir(), "run")
	code, out, errs = runMain(context.Background(), "run", "-f", file, "-o", dir)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	check("run", dir, out, errs)

	// Failures name the URL too.
	for _, args := range [][]string{
		{"bench", "--base-url", "http://user:s3cret@127.0.0.1:1", "--tokenizer", "usage", "-o", filepath.Join(t.TempDir(), "x")},
		{"bench", "--base-url", "http://user:s3cret@", "-o", filepath.Join(t.TempDir(), "y")},
	} {
		code, out, errs := runMain(context.Background(), args...)
		if code == 0 {
			t.Errorf("%q: exit 0", args)
		}
		check(strings.Join(args, " "), "", out, errs)
	}
}
