package hfhub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeHub answers as the Hub does on /{org}/{name}/resolve/{rev}/{file}:
// X-Repo-Commit and ETag on the answer, a 302 to /cdn/{sha256} with
// X-Linked-Etag for a file kept in LFS, a relative 307 for a renamed
// repository, 401 for a gated one without the token, 404 with X-Error-Code
// for what is missing.
type fakeHub struct {
	srv *httptest.Server
	// files by "org/name/file"; commits by "org/name@rev".
	files   map[string][]byte
	commits map[string]string
	lfs     map[string]bool
	gated   map[string]bool
	renamed map[string]string
	token   string

	mu       sync.Mutex
	requests []string
	auth     []string
}

const commitA = "0123456789abcdef0123456789abcdef01234567"

func newFakeHub(t *testing.T) *fakeHub {
	h := &fakeHub{files: map[string][]byte{}, commits: map[string]string{}, lfs: map[string]bool{},
		gated: map[string]bool{}, renamed: map[string]string{}}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

// add puts file of repo at commit, reachable as revision main and as the
// commit itself.
func (h *fakeHub) add(repo, commit, file string, data []byte) {
	h.files[repo+"/"+file] = data
	h.commits[repo+"@main"] = commit
	h.commits[repo+"@"+commit] = commit
}

func (h *fakeHub) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.requests = append(h.requests, r.URL.Path)
	h.auth = append(h.auth, r.Header.Get("Authorization"))
	h.mu.Unlock()
	if sum, ok := strings.CutPrefix(r.URL.Path, "/cdn/"); ok {
		for _, data := range h.files {
			if s := sha256.Sum256(data); hex.EncodeToString(s[:]) == sum {
				w.Header().Set("ETag", `"cdn-object-tag"`)
				w.Write(data)
				return
			}
		}
		http.NotFound(w, r)
		return
	}
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 5)
	if len(parts) != 5 || parts[2] != "resolve" {
		http.NotFound(w, r)
		return
	}
	repo, rev, file := parts[0]+"/"+parts[1], parts[3], parts[4]
	if to, ok := h.renamed[repo]; ok {
		w.Header().Set("Location", "/"+to+"/resolve/"+rev+"/"+file)
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	if h.gated[repo] && r.Header.Get("Authorization") != "Bearer "+h.token {
		w.Header().Set("X-Error-Code", "GatedRepo")
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	commit, ok := h.commits[repo+"@"+rev]
	if !ok {
		w.Header().Set("X-Error-Code", "RevisionNotFound")
		w.WriteHeader(http.StatusNotFound)
		return
	}
	data, ok := h.files[repo+"/"+file]
	if !ok {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.Header().Set("X-Repo-Commit", commit)
	if h.lfs[repo] {
		sum := sha256.Sum256(data)
		w.Header().Set("X-Linked-Etag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.Header().Set("ETag", `W/"pointer-etag"`)
		w.Header().Set("Location", h.srv.URL+"/cdn/"+hex.EncodeToString(sum[:]))
		w.WriteHeader(http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+gitBlobSHA1(data)+`"`)
	w.Write(data)
}

func gitBlobSHA1(data []byte) string {
	s := sha1.New()
	fmt.Fprintf(s, "blob %d\x00", len(data))
	s.Write(data)
	return hex.EncodeToString(s.Sum(nil))
}

func (h *fakeHub) client(t *testing.T) *Client {
	return &Client{Endpoint: h.srv.URL, CacheDir: t.TempDir(),
		ConnectTimeout: time.Second, AnswerTimeout: 2 * time.Second, Deadline: 5 * time.Second}
}

func (h *fakeHub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.requests)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDownloadWritesTheCacheLayout(t *testing.T) {
	hub := newFakeHub(t)
	content := []byte(`{"model": "plain"}`)
	big := []byte(`{"model": "kept in LFS"}`)
	hub.add("org/plain", commitA, "tokenizer.json", content)
	hub.add("org/big", commitA, "tokenizer.json", big)
	hub.lfs["org/big"] = true
	bigSum := sha256.Sum256(big)
	for _, c := range []struct {
		repo, blob string
		data       []byte
	}{
		{"org/plain", gitBlobSHA1(content), content},
		{"org/big", hex.EncodeToString(bigSum[:]), big},
	} {
		cl := hub.client(t)
		got, err := cl.Download(context.Background(), Repo{ID: c.repo}, "tokenizer.json")
		if err != nil {
			t.Fatalf("%s: %v", c.repo, err)
		}
		dir := filepath.Join(cl.CacheDir, "models--"+strings.ReplaceAll(c.repo, "/", "--"))
		pointer := filepath.Join(dir, "snapshots", commitA, "tokenizer.json")
		if got.Path != pointer || got.Commit != commitA {
			t.Errorf("%s: Download = %+v, want %s at %s", c.repo, got, pointer, commitA)
		}
		if link, err := os.Readlink(pointer); err != nil || link != filepath.Join("..", "..", "blobs", c.blob) {
			t.Errorf("%s: snapshot link = %q, %v; want ../../blobs/%s", c.repo, link, err, c.blob)
		}
		if readFile(t, filepath.Join(dir, "blobs", c.blob)) != string(c.data) || readFile(t, pointer) != string(c.data) {
			t.Errorf("%s: the blob or its snapshot does not hold the file", c.repo)
		}
		if ref := readFile(t, filepath.Join(dir, "refs", "main")); ref != commitA {
			t.Errorf("%s: refs/main = %q, want %q", c.repo, ref, commitA)
		}
		// What was written is what the cache lookup finds, offline.
		if p, err := Cached(cl.CacheDir, Repo{ID: c.repo}, "tokenizer.json"); err != nil || p != pointer {
			t.Errorf("%s: Cached after Download = %q, %v", c.repo, p, err)
		}
		leftovers, _ := filepath.Glob(filepath.Join(dir, "*", "*.incomplete"))
		if len(leftovers) > 0 {
			t.Errorf("%s: temporary files left: %v", c.repo, leftovers)
		}
	}
}

func TestDownloadRevisionsAndRenames(t *testing.T) {
	hub := newFakeHub(t)
	const commitB = "fedcba9876543210fedcba9876543210fedcba98"
	hub.add("org/m", commitA, "tokenizer.json", []byte("a"))
	hub.commits["org/m@v2"] = commitB
	hub.renamed["old/m"] = "org/m"

	cl := hub.client(t)
	dir := filepath.Join(cl.CacheDir, "models--org--m")
	if got, err := cl.Download(context.Background(), Repo{ID: "org/m", Revision: "v2"}, "tokenizer.json"); err != nil || got.Commit != commitB {
		t.Fatalf("revision v2: %+v, %v", got, err)
	}
	if ref := readFile(t, filepath.Join(dir, "refs", "v2")); ref != commitB {
		t.Errorf("refs/v2 = %q", ref)
	}
	// A commit as the revision writes no ref.
	if _, err := cl.Download(context.Background(), Repo{ID: "org/m", Revision: commitA}, "tokenizer.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "refs", commitA)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a ref named by the commit was written: %v", err)
	}
	// A renamed repository's relative redirect is followed.
	cl2 := hub.client(t)
	if got, err := cl2.Download(context.Background(), Repo{ID: "old/m"}, "tokenizer.json"); err != nil || got.Commit != commitA {
		t.Errorf("renamed repository: %+v, %v", got, err)
	}
}

func TestDownloadGatedNeedsTheToken(t *testing.T) {
	hub := newFakeHub(t)
	const token = "hf_secretvalue123"
	hub.add("org/gated", commitA, "tokenizer.json", []byte("g"))
	hub.gated["org/gated"] = true
	hub.token = token

	cl := hub.client(t)
	_, err := cl.Download(context.Background(), Repo{ID: "org/gated"}, "tokenizer.json")
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "set HF_TOKEN") {
		t.Fatalf("gated without a token: %v, want a 401 that says to set HF_TOKEN", err)
	}
	if entries, _ := os.ReadDir(cl.CacheDir); len(entries) > 0 {
		t.Errorf("a refused download wrote %v", entries)
	}
	cl.Token = "hf_wrong"
	if _, err = cl.Download(context.Background(), Repo{ID: "org/gated"}, "tokenizer.json"); err == nil || !strings.Contains(err.Error(), "HF_TOKEN was not accepted") || strings.Contains(err.Error(), "hf_wrong") {
		t.Errorf("a wrong token: %v", err)
	}
	cl.Token = token
	if _, err := cl.Download(context.Background(), Repo{ID: "org/gated"}, "tokenizer.json"); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	hub.mu.Lock()
	last := hub.auth[len(hub.auth)-1]
	hub.mu.Unlock()
	if last != "Bearer "+token {
		t.Errorf("Authorization sent = %q", last)
	}
	// The token is in no file of the cache.
	filepath.WalkDir(cl.CacheDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(readFile(t, path), token) {
			t.Errorf("%s holds the token", path)
		}
		return nil
	})
}

func TestDownloadMissing(t *testing.T) {
	hub := newFakeHub(t)
	hub.add("org/m", commitA, "config.json", []byte("{}"))
	cl := hub.client(t)
	for _, c := range []struct {
		repo Repo
		want string
	}{
		{Repo{ID: "org/m"}, "HTTP 404 (EntryNotFound): the repository has no tokenizer.json at revision main"},
		{Repo{ID: "org/m", Revision: "nope"}, "HTTP 404 (RevisionNotFound): no revision nope"},
	} {
		if _, err := cl.Download(context.Background(), c.repo, "tokenizer.json"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.repo, err, c.want)
		}
	}
}

func TestOfflineAsksNothing(t *testing.T) {
	hub := newFakeHub(t)
	hub.add("org/m", commitA, "tokenizer.json", []byte("a"))
	cl := hub.client(t)
	cl.Offline = true
	if _, err := cl.Download(context.Background(), Repo{ID: "org/m"}, "tokenizer.json"); !errors.Is(err, ErrOffline) {
		t.Errorf("offline: %v, want ErrOffline", err)
	}
	if n := hub.count(); n != 0 {
		t.Errorf("offline, the Hub was asked %d times", n)
	}
}

// A Hub that never answers, or stops halfway, costs the timeouts, never a
// hang.
func TestDownloadNeverHangs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // never accepted: the kernel completes the handshake, nothing answers
	cl := &Client{Endpoint: "http://" + ln.Addr().String(), CacheDir: t.TempDir(),
		ConnectTimeout: 100 * time.Millisecond, AnswerTimeout: 200 * time.Millisecond, Deadline: 5 * time.Second}
	start := time.Now()
	_, err = cl.Download(context.Background(), Repo{ID: "org/m"}, "tokenizer.json")
	if err == nil || !strings.Contains(err.Error(), "timeout awaiting response headers") || time.Since(start) > 3*time.Second {
		t.Errorf("a listener that never answers: %v after %v", err, time.Since(start))
	}

	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Repo-Commit", commitA)
		w.Header().Set("Content-Length", "100")
		w.Write([]byte("{"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer stall.Close()
	cl = &Client{Endpoint: stall.URL, CacheDir: t.TempDir(), Deadline: 300 * time.Millisecond}
	start = time.Now()
	if _, err = cl.Download(context.Background(), Repo{ID: "org/m"}, "tokenizer.json"); err == nil || time.Since(start) > 3*time.Second {
		t.Errorf("a body that stalls: %v after %v", err, time.Since(start))
	}
}

func TestDownloadRefusesBadAnswers(t *testing.T) {
	for _, c := range []struct {
		name    string
		headers map[string]string
		want    string
	}{
		{"commit leaves the cache", map[string]string{"X-Repo-Commit": "../../../etc", "ETag": `"abc"`}, "is not a commit hash"},
		{"etag leaves the cache", map[string]string{"X-Repo-Commit": commitA, "ETag": `"../x"`}, "cannot name a blob"},
		{"no commit", map[string]string{"ETag": `"abc"`}, "X-Repo-Commit"},
		{"sha256 differs", map[string]string{"X-Repo-Commit": commitA, "X-Linked-Etag": strings.Repeat("ab", 32)}, "the file's SHA-256 is"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range c.headers {
					w.Header().Set(k, v)
				}
				w.Write([]byte("{}"))
			}))
			defer srv.Close()
			cl := &Client{Endpoint: srv.URL, CacheDir: t.TempDir()}
			if _, err := cl.Download(context.Background(), Repo{ID: "org/m"}, "tokenizer.json"); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want %q", err, c.want)
			}
			if entries, _ := os.ReadDir(cl.CacheDir); len(entries) > 0 {
				t.Errorf("a refused answer wrote %v", entries)
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv("HF_HUB_CACHE", "/c")
	t.Setenv("HF_ENDPOINT", "https://user:pw@mirror.example/")
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HUGGING_FACE_HUB_TOKEN", " legacy ")
	for v, want := range map[string]bool{"1": true, "yes": true, "ON": true, "true": true, "0": false, "": false, "no": false} {
		t.Setenv("HF_HUB_OFFLINE", v)
		c, err := FromEnv()
		if err != nil {
			t.Fatal(err)
		}
		if c.Offline != want {
			t.Errorf("HF_HUB_OFFLINE=%q: offline %v", v, c.Offline)
		}
		if c.Endpoint != "https://user:pw@mirror.example" || c.Token != "legacy" || c.CacheDir != "/c" {
			t.Errorf("FromEnv = %+v", c)
		}
		if strings.Contains(c.Shown(), "pw") {
			t.Errorf("Shown() = %q shows the password", c.Shown())
		}
	}
	t.Setenv("HF_ENDPOINT", "")
	t.Setenv("HF_TOKEN", "tok")
	if c, _ := FromEnv(); c.Endpoint != DefaultEndpoint || c.Token != "tok" {
		t.Errorf("defaults: %+v", c)
	}
}
