package hfhub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

// Defaults of a Client from the environment.
const (
	DefaultEndpoint = "https://huggingface.co"
	// DefaultConnectTimeout bounds dialing the Hub, and again its TLS
	// handshake.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultAnswerTimeout bounds the wait for the answer's headers once
	// the request is sent (huggingface_hub's HF_HUB_ETAG_TIMEOUT is 10 s).
	DefaultAnswerTimeout = 10 * time.Second
	// DefaultDeadline bounds a whole download, body included.
	DefaultDeadline = 2 * time.Minute
	// maxFileBytes bounds a downloaded file; the largest tokenizer.json
	// files of current models are a few tens of MB.
	maxFileBytes = 256 << 20
)

// ErrOffline is wrapped by Download's error when HF_HUB_OFFLINE is set.
var ErrOffline = errors.New("HF_HUB_OFFLINE is set, so the Hub is not asked")

// Client downloads files of model repositories into the hub cache.
type Client struct {
	// Endpoint is the Hub's base URL (HF_ENDPOINT).
	Endpoint string
	// Token is sent as "Authorization: Bearer" to the Hub (HF_TOKEN); Go's
	// client drops it on a redirect to another host.
	Token string
	// Offline forbids every request (HF_HUB_OFFLINE).
	Offline bool
	// CacheDir is the hub cache written to (CacheDir()).
	CacheDir string
	// ConnectTimeout, AnswerTimeout and Deadline bound the download; zero
	// takes the defaults.
	ConnectTimeout, AnswerTimeout, Deadline time.Duration
}

// FromEnv is the Client huggingface_hub's environment describes:
// HF_ENDPOINT (default https://huggingface.co), HF_TOKEN (else the older
// HUGGING_FACE_HUB_TOKEN), HF_HUB_OFFLINE, and the cache of CacheDir.
func FromEnv() (*Client, error) {
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	c := &Client{
		Endpoint: strings.TrimRight(os.Getenv("HF_ENDPOINT"), "/"),
		Token:    strings.TrimSpace(os.Getenv("HF_TOKEN")),
		Offline:  isTrue(os.Getenv("HF_HUB_OFFLINE")),
		CacheDir: cache,
	}
	if c.Endpoint == "" {
		c.Endpoint = DefaultEndpoint
	}
	if c.Token == "" {
		c.Token = strings.TrimSpace(os.Getenv("HUGGING_FACE_HUB_TOKEN"))
	}
	return c, nil
}

// isTrue reads a boolean variable as huggingface_hub does.
func isTrue(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}

// Shown is the endpoint as messages may show it: no user or password.
func (c *Client) Shown() string {
	u, err := url.Parse(c.Endpoint)
	if err != nil {
		return "HF_ENDPOINT"
	}
	return u.Redacted()
}

// Downloaded is a file the Hub gave, as the cache now holds it.
type Downloaded struct {
	// Path is snapshots/COMMIT/FILE in the cache.
	Path string
	// Commit is the commit the revision resolved to (X-Repo-Commit).
	Commit string
}

// Download fetches file of repo as huggingface_hub does, GET
// {endpoint}/{org/name}/resolve/{revision}/{file} with redirects followed,
// the commit read from X-Repo-Commit and the blob's name from X-Linked-Etag
// or ETag, and writes blobs/ETAG, snapshots/COMMIT/FILE (a relative link to
// the blob) and refs/REVISION (when the revision is not the commit). A
// 64-hex ETag is the file's SHA-256 and is checked before anything is
// written.
func (c *Client) Download(ctx context.Context, repo Repo, file string) (Downloaded, error) {
	if err := repo.check(); err != nil {
		return Downloaded{}, err
	}
	if c.Offline {
		return Downloaded{}, ErrOffline
	}
	ctx, cancel := context.WithTimeout(ctx, orDefault(c.Deadline, DefaultDeadline))
	defer cancel()
	u := strings.TrimRight(c.Endpoint, "/") + "/" + repo.ID + "/resolve/" + url.PathEscape(repo.rev()) + "/" + file
	body, meta, err := c.get(ctx, u)
	if err != nil {
		return Downloaded{}, c.explain(repo, file, err)
	}
	etag := meta.etag
	if etag == "" {
		sum := sha256.Sum256(body)
		etag = hex.EncodeToString(sum[:])
	}
	if isSHA256(etag) {
		if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != etag {
			return Downloaded{}, fmt.Errorf("%s of %s from %s: the file's SHA-256 is %x, not the %s its ETag names", file, repo, c.Shown(), sum, etag)
		}
	}
	path, err := c.store(repo, file, meta.commit, etag, body)
	if err != nil {
		return Downloaded{}, fmt.Errorf("writing %s of %s into the Hugging Face cache: %w", file, repo, err)
	}
	return Downloaded{Path: path, Commit: meta.commit}, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

func isSHA256(s string) bool { return sha256Hex.MatchString(s) }

// answerMeta is what the Hub's answers told of the file.
type answerMeta struct {
	commit, etag string
}

// statusError is an answer other than 200, with the Hub's X-Error-Code.
type statusError struct {
	status int
	code   string
}

func (e *statusError) Error() string {
	if e.code != "" {
		return fmt.Sprintf("HTTP %d (%s)", e.status, e.code)
	}
	return fmt.Sprintf("HTTP %d", e.status)
}

// get fetches u, following redirects, and returns the body with the
// commit and ETag of the first answer in the chain that names a commit
// (the Hub's resolve answer, before any CDN's).
func (c *Client) get(ctx context.Context, u string) ([]byte, answerMeta, error) {
	var chain []http.Header
	connect := orDefault(c.ConnectTimeout, DefaultConnectTimeout)
	hc := &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: connect}).DialContext,
			TLSHandshakeTimeout:   2 * connect,
			ResponseHeaderTimeout: orDefault(c.AnswerTimeout, DefaultAnswerTimeout),
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			chain = append(chain, req.Response.Header)
			return nil
		},
	}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, answerMeta{}, err
	}
	req.Header.Set("User-Agent", "rehearse")
	req.Header.Set("Accept-Encoding", "identity")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, answerMeta{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, answerMeta{}, &statusError{status: resp.StatusCode, code: resp.Header.Get("X-Error-Code")}
	}
	chain = append(chain, resp.Header)
	meta, err := readMeta(chain)
	if err != nil {
		return nil, meta, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxFileBytes+1))
	if err != nil {
		return nil, meta, err
	}
	if len(body) > maxFileBytes {
		return nil, meta, fmt.Errorf("the file is over %d MiB", maxFileBytes>>20)
	}
	return body, meta, nil
}

// readMeta takes the commit and ETag from the first answer naming a
// commit, refusing values that could not name a folder or file.
func readMeta(chain []http.Header) (answerMeta, error) {
	for _, h := range chain {
		commit := h.Get("X-Repo-Commit")
		if commit == "" {
			continue
		}
		etag := h.Get("X-Linked-Etag")
		if etag == "" {
			etag = h.Get("ETag")
		}
		etag = strings.Trim(strings.TrimPrefix(etag, "W/"), `"`)
		if !safeName.MatchString(commit) {
			return answerMeta{}, fmt.Errorf("the answer's X-Repo-Commit %q is not a commit hash", commit)
		}
		if etag != "" && !safeName.MatchString(etag) {
			return answerMeta{}, fmt.Errorf("the answer's ETag %q cannot name a blob", etag)
		}
		return answerMeta{commit: commit, etag: etag}, nil
	}
	return answerMeta{}, errors.New("no answer named the commit (X-Repo-Commit): is HF_ENDPOINT a Hugging Face Hub?")
}

// explain turns a failed download into one line saying what to do.
func (c *Client) explain(repo Repo, file string, err error) error {
	at := fmt.Sprintf("%s of %s from %s", file, repo, c.Shown())
	var se *statusError
	if !errors.As(err, &se) {
		return fmt.Errorf("%s: %v", at, err)
	}
	switch {
	case se.status == http.StatusUnauthorized && c.Token == "":
		return fmt.Errorf("%s: %v: the repository is gated or private (or does not exist); set HF_TOKEN to a token with access", at, se)
	case se.status == http.StatusUnauthorized:
		return fmt.Errorf("%s: %v: HF_TOKEN was not accepted", at, se)
	case se.status == http.StatusForbidden:
		return fmt.Errorf("%s: %v: HF_TOKEN has no access; a gated model needs its access granted at %s/%s", at, se, c.Shown(), repo.ID)
	case se.code == "EntryNotFound":
		return fmt.Errorf("%s: %v: the repository has no %s at revision %s", at, se, file, repo.rev())
	case se.code == "RevisionNotFound":
		return fmt.Errorf("%s: %v: no revision %s", at, se, repo.rev())
	case se.status == http.StatusNotFound:
		return fmt.Errorf("%s: %v: no such repository or file", at, se)
	}
	return fmt.Errorf("%s: %v", at, se)
}
