//go:build unix

package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
)

// hangGuard bounds every row of the reliability suite: it is not a speed
// requirement (a row takes milliseconds) but the line between "slow" and
// "hung", so that a command that blocks on a FIFO or spins on /dev/zero
// fails the row instead of the whole test binary.
const hangGuard = 20 * time.Second

// outsideText is the content of a file outside the bundle that no command may
// read. SHA256SUMS entries that reach it carry its true digest, so a
// command that did read it would find the digest matching and report
// nothing: a problem naming the entry is the proof that it was refused.
const outsideText = "outside the bundle: never read\n"

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// layout is one row's ground: a good bundle b and, beside it, a folder
// outside that holds secret.txt.
type layout struct {
	b, outside string
}

func newLayout(t *testing.T) layout {
	t.Helper()
	base := t.TempDir()
	l := layout{b: filepath.Join(base, "b"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{l.b, l.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(l.outside, "secret.txt"), []byte(outsideText), 0o644); err != nil {
		t.Fatal(err)
	}
	res := bundletest.SeedLike()
	if err := bundle.WriteResults(l.b, res); err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Servers {
		if err := os.WriteFile(filepath.Join(l.b, s.Log), []byte("log of "+s.Name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := bundle.WriteSumsKnown(l.b, nil); err != nil {
		t.Fatal(err)
	}
	return l
}

// checkOutside fails the test if anything outside the bundle was written:
// the outside folder must still hold secret.txt alone, unchanged.
func (l layout) checkOutside(t *testing.T) {
	t.Helper()
	entries, _ := os.ReadDir(l.outside)
	data, _ := os.ReadFile(filepath.Join(l.outside, "secret.txt"))
	if len(entries) != 1 || string(data) != outsideText {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the folder outside the bundle was written: it holds %q, secret.txt %q", names, data)
	}
}

// dropMechanismCheck rewrites the bundle without its mechanism check, so
// that merging it with itself is refused for nothing but the duplicate
// (two mechanism checks are refused on their own).
func (l layout) dropMechanismCheck(t *testing.T) {
	t.Helper()
	res, err := bundle.ReadResults(l.b)
	if err != nil {
		t.Fatal(err)
	}
	res.MechanismCheck, res.Workload.MechanismCheck = nil, nil
	var waves []contract.Wave
	for _, w := range res.Waves {
		if w.Kind != contract.KindMechanismCheck {
			waves = append(waves, w)
		}
	}
	var recs []contract.Record
	for _, r := range res.Records {
		if r.Kind != contract.KindMechanismCheck {
			recs = append(recs, r)
		}
	}
	res.Waves, res.Records = waves, recs
	res.Recompute()
	if err := bundle.WriteResults(l.b, res); err != nil {
		t.Fatal(err)
	}
	if err := bundle.WriteSumsKnown(l.b, nil); err != nil {
		t.Fatal(err)
	}
}

// copy copies the bundle's files into a folder beside it.
func (l layout) copy(t *testing.T, name string) string {
	t.Helper()
	c := filepath.Join(filepath.Dir(l.b), name)
	if err := os.CopyFS(c, os.DirFS(l.b)); err != nil {
		t.Fatal(err)
	}
	return c
}

// list appends an entry to the bundle's SHA256SUMS.
func (l layout) list(t *testing.T, name, digest string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(l.b, bundle.SumsFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "%s  %s\n", digest, name)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// replace puts a symbolic link to target in place of the bundle's name.
func (l layout) symlink(t *testing.T, target, name string) {
	t.Helper()
	os.RemoveAll(filepath.Join(l.b, name))
	if err := os.Symlink(target, filepath.Join(l.b, name)); err != nil {
		t.Fatal(err)
	}
}

// up is enough "../" to climb from the bundle to the file system's root.
func up(dir string) string {
	return strings.Repeat("../", strings.Count(filepath.Clean(dir), string(filepath.Separator))+2)
}

// badBundle is one row: setup builds the hostile or broken bundle and
// returns the command line to run on it; the command must exit with code
// and its output hold every string of want (the entry, named, with what is
// wrong; %B stands for the bundle's folder, %D for the folder holding it
// and outside), within hangGuard.
type badBundle struct {
	name  string
	setup func(t *testing.T, l layout) []string
	code  int
	want  []string
}

var badBundles = []badBundle{
	{
		name: "a ../ entry in SHA256SUMS",
		setup: func(t *testing.T, l layout) []string {
			l.list(t, "../outside/secret.txt", sha(outsideText))
			return []string{"verify", l.b}
		},
		code: 1, want: []string{"../outside/secret.txt: not a file name inside the bundle"},
	},
	{
		name: "an absolute entry in SHA256SUMS",
		setup: func(t *testing.T, l layout) []string {
			l.list(t, filepath.Join(l.outside, "secret.txt"), sha(outsideText))
			return []string{"verify", l.b}
		},
		code: 1, want: []string{"/outside/secret.txt: not a file name inside the bundle"},
	},
	{
		name: "a ../../dev/zero entry in SHA256SUMS",
		setup: func(t *testing.T, l layout) []string {
			l.list(t, up(l.b)+"dev/zero", sha(""))
			return []string{"verify", l.b}
		},
		code: 1, want: []string{"dev/zero: not a file name inside the bundle"},
	},
	{
		name: "a FIFO listed in SHA256SUMS",
		setup: func(t *testing.T, l layout) []string {
			if err := syscall.Mkfifo(filepath.Join(l.b, "stream.log"), 0o644); err != nil {
				t.Fatal(err)
			}
			l.list(t, "stream.log", sha(""))
			return []string{"verify", l.b}
		},
		code: 1, want: []string{"stream.log: not a regular file (a named pipe)"},
	},
	{
		name: "a FIFO named results.json",
		setup: func(t *testing.T, l layout) []string {
			os.Remove(filepath.Join(l.b, bundle.ResultsFile))
			if err := syscall.Mkfifo(filepath.Join(l.b, bundle.ResultsFile), 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{"verify", l.b}
		},
		code: 1, want: []string{"results.json: not a regular file (a named pipe)"},
	},
	{
		name: "results.json a symlink to /dev/zero (verify)",
		setup: func(t *testing.T, l layout) []string {
			l.symlink(t, "/dev/zero", bundle.ResultsFile)
			return []string{"verify", l.b}
		},
		code: 1, want: []string{"results.json: a symbolic link"},
	},
	{
		name: "results.json a symlink to /dev/zero (report)",
		setup: func(t *testing.T, l layout) []string {
			l.symlink(t, "/dev/zero", bundle.ResultsFile)
			return []string{"report", l.b}
		},
		code: 2, want: []string{"results.json: a symbolic link"},
	},
	{
		name: "a log that is a symlink to a file outside",
		setup: func(t *testing.T, l layout) []string {
			l.symlink(t, filepath.Join(l.outside, "secret.txt"), "naive.log")
			sums, _ := os.ReadFile(filepath.Join(l.b, bundle.SumsFile))
			var kept []string
			for _, line := range strings.SplitAfter(string(sums), "\n") {
				if !strings.HasSuffix(line, "  naive.log\n") {
					kept = append(kept, line)
				}
			}
			os.WriteFile(filepath.Join(l.b, bundle.SumsFile), []byte(strings.Join(kept, "")), 0o644)
			l.list(t, "naive.log", sha(outsideText))
			return []string{"verify", l.b}
		},
		code: 1, want: []string{"naive.log: a symbolic link"},
	},
	{
		name: "a symlinked subdirectory",
		setup: func(t *testing.T, l layout) []string {
			l.symlink(t, l.outside, "figures")
			l.list(t, "figures/secret.txt", sha(outsideText))
			return []string{"verify", l.b}
		},
		code: 1, want: []string{"figures/secret.txt: figures is a symbolic link", "figures: a symbolic link"},
	},
	{
		name: "a dangling symlink journal",
		setup: func(t *testing.T, l layout) []string {
			l.symlink(t, filepath.Join(l.outside, "journal.jsonl"), bundle.JournalFile)
			return []string{"verify", l.b}
		},
		code: 1, want: []string{"journal.jsonl: a symbolic link"},
	},
	{
		name: "a directory named like a listed file",
		setup: func(t *testing.T, l layout) []string {
			os.Remove(filepath.Join(l.b, "naive.log"))
			if err := os.Mkdir(filepath.Join(l.b, "naive.log"), 0o755); err != nil {
				t.Fatal(err)
			}
			return []string{"verify", l.b}
		},
		code: 1, want: []string{"naive.log: not a regular file (a directory)"},
	},
	{
		name: "an oversized results.json",
		setup: func(t *testing.T, l layout) []string {
			// Sparse: the size is what a reader must refuse, no disk is used.
			if err := os.Truncate(filepath.Join(l.b, bundle.ResultsFile), bundle.ResultsLimit.Bytes+1); err != nil {
				t.Fatal(err)
			}
			return []string{"verify", l.b}
		},
		code: 1, want: []string{fmt.Sprintf("results.json: %d bytes, more than the 16 GiB a results.json may hold", bundle.ResultsLimit.Bytes+1)},
	},
	{
		name: "a servers[].log naming a file outside (merge)",
		setup: func(t *testing.T, l layout) []string {
			res, err := bundle.ReadResults(l.b)
			if err != nil {
				t.Fatal(err)
			}
			res.Servers[0].Log = "../outside/secret.txt"
			if err := bundle.WriteResults(l.b, res); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(l.b, "naive.log"))
			if err := bundle.WriteSumsKnown(l.b, nil); err != nil {
				t.Fatal(err)
			}
			// The merged bundle goes beside the outside folder, so that the
			// log's name reaches it from there too.
			return []string{"merge", "-o", filepath.Join(filepath.Dir(l.b), "merged"), l.b}
		},
		code: 2, want: []string{"../outside/secret.txt: not a file name inside the bundle"},
	},
	{
		name: "the same bundle merged twice",
		setup: func(t *testing.T, l layout) []string {
			l.dropMechanismCheck(t)
			return []string{"merge", "-o", filepath.Join(filepath.Dir(l.b), "merged"), l.b, l.b + "/"}
		},
		code: 2, want: []string{"part 2 (" + "%B/) is part 1 (%B) given twice"},
	},
	{
		name: "the same rehearsal in two folders merged",
		setup: func(t *testing.T, l layout) []string {
			l.dropMechanismCheck(t)
			c := l.copy(t, "copy")
			return []string{"merge", "-o", filepath.Join(filepath.Dir(l.b), "merged"), l.b, c}
		},
		code: 2, want: []string{"%D/copy holds the same rehearsal as %B (the same 246 records)"},
	},
	{
		name: "an unverifiable input to merge",
		setup: func(t *testing.T, l layout) []string {
			l.dropMechanismCheck(t)
			c := l.copy(t, "copy")
			os.WriteFile(filepath.Join(c, "naive.log"), []byte("changed\n"), 0o644)
			return []string{"merge", "-o", filepath.Join(filepath.Dir(l.b), "merged"), l.b, c}
		},
		code: 1, want: []string{"%D/copy: naive.log: SHA-256", "%D/copy does not verify"},
	},
	{
		name: "an unverifiable input to compare",
		setup: func(t *testing.T, l layout) []string {
			c := l.copy(t, "copy")
			os.WriteFile(filepath.Join(c, "naive.log"), []byte("changed\n"), 0o644)
			return []string{"compare", l.b, c}
		},
		code: 1, want: []string{"%D/copy: naive.log: SHA-256", "bundle B: %D/copy does not verify"},
	},
	{
		name: "a journal cut after 4 of a wave's 8 records (report)",
		setup: func(t *testing.T, l layout) []string {
			res := bundletest.SeedLike()
			for _, f := range []string{bundle.ResultsFile, bundle.SumsFile} {
				os.Remove(filepath.Join(l.b, f))
			}
			j, err := bundle.CreateJournal(filepath.Join(l.b, bundle.JournalFile))
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			j.WriteHeader(res)
			for _, w := range res.Waves {
				release := w
				release.WallS, release.ReleaseSpreadS = 0, 0
				j.WriteWave(release)
				n := 0
				for _, r := range res.Records {
					if r.Wave == w.ID {
						if w.Concurrency == 8 && n == 4 {
							return []string{"report", l.b} // SIGKILL here
						}
						j.WriteRecord(r)
						n++
					}
				}
				j.WriteWave(w)
			}
			t.Fatal("no 8-client wave")
			return nil
		},
		code: 0, want: []string{"results.json rebuilt from journal.jsonl (7 records; 1 wave(s) cut by the journal's end, marked stopped)"},
	},
	{
		name: "SHA256SUMS a symlink to a file outside",
		setup: func(t *testing.T, l layout) []string {
			outside := filepath.Join(l.outside, "secret.txt")
			l.symlink(t, outside, bundle.SumsFile)
			return []string{"verify", l.b}
		},
		code: 1, want: []string{"SHA256SUMS: a symbolic link"},
	},
	{
		name: "a notes file that is a FIFO (annotate)",
		setup: func(t *testing.T, l layout) []string {
			notes := filepath.Join(l.b, "notes.md")
			if err := syscall.Mkfifo(notes, 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{"annotate", l.b, "-f", notes}
		},
		code: 2, want: []string{"notes.md: not a regular file (a named pipe)"},
	},
	{
		name: "a results.json cut in half",
		setup: func(t *testing.T, l layout) []string {
			path := filepath.Join(l.b, bundle.ResultsFile)
			data, _ := os.ReadFile(path)
			os.WriteFile(path, data[:len(data)/2], 0o644)
			return []string{"verify", l.b}
		},
		code: 1, want: []string{"results.json: truncated JSON"},
	},
}

// TestReliabilityBadBundles runs every command that reads bundles on
// hostile and broken bundles: each must refuse with a problem naming the
// entry, never read outside the bundle, never hang.
func TestReliabilityBadBundles(t *testing.T) {
	for _, row := range badBundles {
		t.Run(row.name, func(t *testing.T) {
			l := newLayout(t)
			args := row.setup(t, l)
			type result struct {
				code      int
				out, errs string
			}
			done := make(chan result, 1)
			go func() {
				code, out, errs := run(t, args...)
				done <- result{code, out, errs}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(hangGuard):
				t.Fatalf("%v: still running after %v (hung)", args, hangGuard)
			}
			msg := r.out + r.errs
			if r.code != row.code {
				t.Errorf("%v: exit %d, want %d; output:\n%s", args, r.code, row.code, msg)
			}
			for _, w := range row.want {
				w = strings.NewReplacer("%B", l.b, "%D", filepath.Dir(l.b)).Replace(w)
				if !strings.Contains(msg, w) {
					t.Errorf("%v: output does not name the entry with %q:\n%s", args, w, msg)
				}
			}
			if strings.Contains(msg, sha(outsideText)) || strings.Contains(msg, strings.TrimSpace(outsideText)) {
				t.Errorf("%v: the output shows the outside file was read:\n%s", args, msg)
			}
			l.checkOutside(t)
		})
	}
}

// TestBundleCommandsRefuseAMissingFolderAlike: every command that reads a
// bundle says the same of a folder that is not there: exit 2, one line
// naming it, nothing on standard output.
func TestBundleCommandsRefuseAMissingFolderAlike(t *testing.T) {
	l := newLayout(t)
	missing := filepath.Join(filepath.Dir(l.b), "nodir")
	notes := filepath.Join(l.outside, "notes.md")
	if err := os.WriteFile(notes, []byte("notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := missing + ": no such bundle directory\n" // compare says which: "bundle A: "
	for _, args := range [][]string{
		{"verify", missing},
		{"report", missing},
		{"export", "--format", "jsonl", missing},
		{"compare", missing, missing},
		{"annotate", missing, "-f", notes},
		{"merge", "-o", filepath.Join(l.outside, "m"), missing, missing},
	} {
		code, out, errs := run(t, args...)
		if code != 2 || out != "" || !strings.HasPrefix(errs, "rehearse: ") || !strings.HasSuffix(errs, want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line ending %q", args, code, out, errs, want)
		}
	}
}
