package hfhub

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCacheDirAndCached(t *testing.T) {
	root := t.TempDir()
	const repo = "Qwen/Qwen2.5-1.5B-Instruct"
	mk := func(hub, rev string) string {
		dir := filepath.Join(hub, "models--Qwen--Qwen2.5-1.5B-Instruct", "snapshots", rev)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "tokenizer.json")
		if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const rev = "989aa7980e4cf806f80c7fef2b1adb7bc71aa306"
	viaHubCache := mk(filepath.Join(root, "a"), rev)
	viaHome := mk(filepath.Join(root, "home", "hub"), rev)
	userHub := filepath.Join(root, "user", ".cache", "huggingface", "hub")
	viaUser := mk(userHub, rev)
	if err := writeWhole(filepath.Join(userHub, "models--Qwen--Qwen2.5-1.5B-Instruct", "refs", "main"), []byte(rev+"\n")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", filepath.Join(root, "user"))
	t.Setenv("HF_HUB_CACHE", filepath.Join(root, "a"))
	t.Setenv("HF_HOME", filepath.Join(root, "home"))
	check := func(want string) {
		t.Helper()
		dir, err := CacheDir()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Cached(dir, Repo{ID: repo, Revision: rev}, "tokenizer.json")
		if err != nil || got != want {
			t.Errorf("Cached = %q, %v; want %q", got, err, want)
		}
	}
	check(viaHubCache)
	t.Setenv("HF_HUB_CACHE", "")
	check(viaHome)
	t.Setenv("HF_HOME", "")
	check(viaUser)
	if got, err := Cached(userHub, Repo{ID: repo}, "tokenizer.json"); err != nil || got != viaUser {
		t.Errorf("revision main through refs/main: %q, %v", got, err)
	}
	_, err := Cached(userHub, Repo{ID: repo, Revision: "ffff"}, "tokenizer.json")
	if !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "tokenizer.json of "+repo+" at revision ffff is not in the Hugging Face cache") {
		t.Errorf("a revision not cached: %v", err)
	}
	for _, c := range []struct{ id, rev, want string }{
		{"Qwen", rev, "not a Hugging Face repository id"},
		{"../x/y", rev, "not a Hugging Face repository id"},
		{"a/b/c", rev, "not a Hugging Face repository id"},
		{repo, "../../etc", "not a commit"},
	} {
		if _, err := Cached(userHub, Repo{ID: c.id, Revision: c.rev}, "tokenizer.json"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Cached(%q, %q) error = %v, want %q", c.id, c.rev, err, c.want)
		}
	}
}

func TestParseRepoAndSnapshotOf(t *testing.T) {
	for in, want := range map[string]Repo{
		"org/name":            {ID: "org/name"},
		"org/name@v1.0":       {ID: "org/name", Revision: "v1.0"},
		"org/name@" + commitA: {ID: "org/name", Revision: commitA},
	} {
		if got, err := ParseRepo(in); err != nil || got != want || got.String() != in {
			t.Errorf("ParseRepo(%q) = %+v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"name", "org/", "/name", "org/name@a/b", "org/na me", "org/name@ v1"} {
		if r, err := ParseRepo(bad); err == nil {
			t.Errorf("ParseRepo(%q) = %+v, want an error", bad, r)
		}
	}
	p := filepath.Join("/x", "hub", "models--org--name", "snapshots", commitA, "tokenizer.json")
	if r, ok := SnapshotOf(p); !ok || r != (Repo{ID: "org/name", Revision: commitA}) {
		t.Errorf("SnapshotOf(%q) = %+v, %v", p, r, ok)
	}
	for _, other := range []string{"/x/tokenizer.json", "/x/models--org--name/blobs/abc", "/x/snapshots/" + commitA + "/tokenizer.json"} {
		if r, ok := SnapshotOf(other); ok {
			t.Errorf("SnapshotOf(%q) = %+v", other, r)
		}
	}
}
