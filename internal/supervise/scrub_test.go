package supervise

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/secret"
)

var testBarrier = []byte("\x00barrier\x00")

// scrubInPieces runs text through a scrubber cut at the given offsets.
func scrubInPieces(secrets []string, text string, cuts ...int) string {
	s := newScrubber(secrets, testBarrier)
	var out []byte
	prev := 0
	for _, c := range append(cuts, len(text)) {
		if c < prev || c > len(text) {
			continue
		}
		out = s.scrub(out, []byte(text[prev:c]), func() []byte { return []byte("<MARK>") })
		prev = c
	}
	return string(s.flush(out, func() []byte { return []byte("<MARK>") }))
}

func TestScrubberAtEverySplit(t *testing.T) {
	secrets := []string{"hf_abcdef", "hf_abc1234567", "sk-key"}
	text := "HF_TOKEN=hf_abcdef\nOTHER=hf_abc1234567 key=sk-key; hf_ab is not one, sk-ke neither\x00barrier\x00after"
	want := "HF_TOKEN=" + secret.Redacted + "\nOTHER=" + secret.Redacted + " key=" + secret.Redacted + "; hf_ab is not one, sk-ke neither<MARK>after"
	for i := 0; i <= len(text); i++ {
		for j := i; j <= len(text); j++ {
			if got := scrubInPieces(secrets, text, i, j); got != want {
				t.Fatalf("cut at %d and %d:\n got %q\nwant %q", i, j, got, want)
			}
		}
	}
	// One byte per write.
	var cuts []int
	for i := range text {
		cuts = append(cuts, i)
	}
	if got := scrubInPieces(secrets, text, cuts...); got != want {
		t.Errorf("byte by byte: %q", got)
	}
}

// TestScrubberSecretAcrossAMarker: a server that writes a secret in two
// pieces, with a marker line landing between them (rehearse marked the log
// in that instant), still has the whole secret redacted, at every split of
// the writes; the marker follows the redaction.
func TestScrubberSecretAcrossAMarker(t *testing.T) {
	secrets := []string{"hf_envsecret1"}
	text := "split: hf_env\x00barrier\x00secret1 end\nnext \x00barrier\x00line\n"
	want := "split: " + secret.Redacted + "<MARK> end\nnext <MARK>line\n"
	for i := 0; i <= len(text); i++ {
		for j := i; j <= len(text); j++ {
			if got := scrubInPieces(secrets, text, i, j); got != want {
				t.Fatalf("cut at %d and %d:\n got %q\nwant %q", i, j, got, want)
			}
		}
	}
}

func TestScrubberEndOfStream(t *testing.T) {
	secrets := []string{"hf_abcdef"}
	// A tail that is the start of a secret, long enough to tell, is
	// redacted at the end; a short one is kept.
	if got := scrubInPieces(secrets, "x hf_abcd"); got != "x "+secret.Redacted {
		t.Errorf("long tail: %q", got)
	}
	if got := scrubInPieces(secrets, "x hf_"); got != "x hf_" {
		t.Errorf("short tail: %q", got)
	}
	// Values too short to scrub without garbling the log are left.
	if got := scrubInPieces([]string{"1", "abc", ""}, "a 1 abc"); got != "a 1 abc" {
		t.Errorf("short secrets: %q", got)
	}
}

func FuzzScrubber(f *testing.F) {
	f.Add("token=hf_secret and sk-1234 end", "hf_secret", "sk-1234", uint8(3), uint8(7))
	f.Add("aaaaab", "aab", "aaab", uint8(1), uint8(2))
	f.Fuzz(func(t *testing.T, text, s1, s2 string, c1, c2 uint8) {
		if strings.ContainsAny(s1+s2, "[]\x00<>") {
			t.Skip() // a secret made of the marker's own letters could reappear across it
		}
		secrets := []string{s1, s2}
		whole := scrubInPieces(secrets, text)
		if cut := scrubInPieces(secrets, text, int(c1)%(len(text)+1), int(c2)%(len(text)+1)); cut != whole {
			t.Fatalf("cut output %q differs from whole %q", cut, whole)
		}
		for _, s := range secrets {
			if len(s) >= MinSecretLen && strings.Contains(strings.ReplaceAll(whole, secret.Redacted, "\x00"), s) {
				t.Fatalf("secret %q survives in %q", s, whole)
			}
		}
	})
}

// TestMarkerKeepsItsPlace: the server's bytes written before a marker line
// precede it in the log, however the pipe was read.
func TestMarkerKeepsItsPlace(t *testing.T) {
	path := t.TempDir() + "/m.log"
	f, err := createLog(path)
	if err != nil {
		t.Fatal(err)
	}
	l, err := newServerLog(f, []string{"hf_secretvalue"})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for i := range 200 {
		line := strings.Repeat("x", i) + " hf_secretvalue\n"
		l.w.Write([]byte(line))
		want.WriteString(strings.Repeat("x", i) + " " + secret.Redacted + "\n")
		if i%50 == 0 {
			l.mark("==> mark\n")
			want.WriteString("==> mark\n")
		}
	}
	l.finish(groupGoneWait)
	f.Close()
	if got := readLog(t, path); got != want.String() {
		t.Errorf("log differs:\n%s", got)
	}
}
