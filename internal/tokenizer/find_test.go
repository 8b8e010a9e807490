package tokenizer

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	tiny := tinyJSON(t, nil)
	sum := sha256.Sum256(tiny)
	tinySHA := hex.EncodeToString(sum[:])
	dir := t.TempDir()
	path := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(path, tiny, 0o644); err != nil {
		t.Fatal(err)
	}
	hub := t.TempDir()
	t.Setenv("HF_HUB_CACHE", hub)
	snap := filepath.Join(hub, "models--org--tiny", "snapshots", "abc")
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, "tokenizer.json"), tiny, 0o644); err != nil {
		t.Fatal(err)
	}

	q25, err := Find(Want{SHA256: EmbeddedSHA256, Variant: VariantQwen25, Path: path})
	if err != nil || q25.Info().Name != VariantQwen25 {
		t.Fatalf("embedded digest with variant qwen2.5: %v, %v", q25, err)
	}
	if q3, err := Find(Want{SHA256: EmbeddedSHA256}); err != nil || q3.Info().Name != VariantQwen3 {
		t.Fatalf("embedded digest, no variant: %v, %v (want the file as it is, Qwen3)", q3, err)
	}
	if got, err := Find(Want{SHA256: tinySHA, Path: path}); err != nil || got.Info().Source != path {
		t.Errorf("a path with the digest: %v, %v", got, err)
	}
	if got, err := Find(Want{SHA256: tinySHA, Model: "org/tiny", Revision: "abc"}); err != nil || !strings.HasPrefix(got.Info().Source, hub) {
		t.Errorf("the Hugging Face cache: %v, %v", got, err)
	}
	other := strings.Repeat("0", 64)
	_, err = Find(Want{SHA256: other, Path: path, Model: "org/missing"})
	for _, want := range []string{"no tokenizer with sha256 " + other + " at hand", "not the embedded file", path + " has sha256 " + tinySHA, "org/missing at revision main is not in the Hugging Face cache"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	if _, err := Find(Want{}); err == nil || !strings.Contains(err.Error(), "no tokenizer sha256") {
		t.Errorf("no digest: %v", err)
	}
}
