package tokenizer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/rehearse/rehearse/internal/hfhub"
)

// Request names the tokenizer wanted. Every command finds its tokenizer
// through Resolve with one.
type Request struct {
	// Path is a tokenizer.json, or a folder holding one, named explicitly.
	Path string
	// Variant is an embedded variant named explicitly (VariantQwen3,
	// VariantQwen25).
	Variant string
	// Model is the model whose own tokenizer is wanted: a Hugging Face id
	// "org/name" or "org/name@revision", or the model's local folder.
	Model string
	// Revision is Model's revision: a commit, branch or tag ("" is main).
	Revision string
	// SHA256, when set, is the digest the file must have (a bundle's
	// provenance): a candidate with another is passed over, and the
	// embedded file is taken, in Variant, when the digest is its own.
	SHA256 string
	// Hub is the Hub and its cache; nil reads them from the environment
	// (hfhub.FromEnv).
	Hub *hfhub.Client
}

// Origins of a resolved tokenizer.
const (
	OriginPath     = "path"     // Request.Path, or Model as a local folder
	OriginCache    = "cache"    // the Hugging Face cache
	OriginEmbedded = "embedded" // the embedded Qwen file
	OriginHub      = "hub"      // downloaded from the Hub into the cache
)

// Origin says where Resolve found the tokenizer.
type Origin struct {
	Kind string
	// Note is a line for the bundle's notes where the origin needs saying
	// (the embedded file for a model of its family, a download); "" else.
	Note string
}

// RefusedError is a tokenizer.json found for the request that this package
// cannot count exactly: Err names the component.
type RefusedError struct {
	Path string
	Err  error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s cannot be counted exactly (only byte-level BPE is implemented): %v", e.Path, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// NotFoundError is a request no source could answer: Tried says what each
// source said.
type NotFoundError struct {
	Model  string
	SHA256 string
	Tried  []string
}

func (e *NotFoundError) Error() string {
	what := "no tokenizer was named"
	switch {
	case e.SHA256 != "":
		what = fmt.Sprintf("no tokenizer with sha256 %s at hand", e.SHA256)
	case e.Model != "":
		what = fmt.Sprintf("no tokenizer.json of model %s at hand", e.Model)
	}
	if len(e.Tried) == 0 {
		return what
	}
	return what + " (" + strings.Join(e.Tried, "; ") + ")"
}

// Resolve finds the tokenizer req names, in SPEC §6's order: the explicit
// path or variant; the model's local folder; the Hugging Face cache at the
// revision; the embedded Qwen file for a model of its family (Qwen2,
// Qwen2.5, Qwen3), so offline machines never reach for the network for it;
// then the Hub, as huggingface_hub downloads, into that cache. It never
// answers with another model's tokenizer: when none of these has the
// model's own it returns a *NotFoundError, and a file found that cannot be
// counted exactly is a *RefusedError, never passed over for another.
func Resolve(ctx context.Context, req Request) (*Tokenizer, Origin, error) {
	if req.SHA256 == EmbeddedSHA256 {
		t, err := Embedded(req.Variant)
		return t, Origin{Kind: OriginEmbedded}, err
	}
	if req.Variant != "" && req.SHA256 == "" {
		t, err := Embedded(req.Variant)
		return t, Origin{Kind: OriginEmbedded}, err
	}
	r := resolver{req: req}
	if req.Path != "" {
		if t, err := r.load(req.Path); t != nil || err != nil {
			return t, Origin{Kind: OriginPath}, err
		}
	}
	if req.Model == "" {
		return nil, Origin{}, &NotFoundError{SHA256: req.SHA256, Tried: r.tried}
	}
	if local := localTokenizer(req.Model); local != "" {
		if t, err := r.load(local); t != nil || err != nil {
			return t, Origin{Kind: OriginPath}, err
		}
	}
	return r.model(ctx)
}

// resolver is one Resolve: the request and what each source said.
type resolver struct {
	req   Request
	tried []string
}

// load reads the tokenizer at path (a file, or a folder holding
// tokenizer.json). Without a digest to match, an error is the answer; with
// one, a file that fails or differs is noted and passed over (nil, nil).
func (r *resolver) load(path string) (*Tokenizer, error) {
	path = File(path)
	data, err := os.ReadFile(path)
	if err != nil {
		if r.req.SHA256 == "" {
			return nil, err
		}
		r.tried = append(r.tried, err.Error())
		return nil, nil
	}
	t, err := parse(data, nil)
	switch {
	case err != nil && r.req.SHA256 == "":
		return nil, &RefusedError{Path: path, Err: err}
	case err != nil:
		r.tried = append(r.tried, fmt.Sprintf("%s: %v", path, err))
		return nil, nil
	case r.req.SHA256 != "" && t.info.SHA256 != r.req.SHA256:
		r.tried = append(r.tried, fmt.Sprintf("%s has sha256 %s", path, t.info.SHA256))
		return nil, nil
	}
	t.info.Name, t.info.Source = path, path
	return t, nil
}

// File is the tokenizer.json a path names, as every --tokenizer flag
// takes it: the path itself, or the tokenizer.json in it when it is a
// folder (a model's folder). Resolve reads a Request.Path through it, and
// so does rehearse model write, which needs the file's bytes.
func File(path string) string {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return filepath.Join(path, "tokenizer.json")
	}
	return path
}

// localTokenizer is the tokenizer.json of a model named by its folder, as
// a server may serve a model from a path (a folder there is taken before
// the Hub's id of the same name, as transformers takes it); "" when model
// names none.
func localTokenizer(model string) string {
	path := filepath.Join(model, "tokenizer.json")
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// model looks for the model's own tokenizer.json: in the Hugging Face
// cache, as the embedded file for a model of its family, on the Hub.
func (r *resolver) model(ctx context.Context) (*Tokenizer, Origin, error) {
	repo, err := r.repo()
	hub := r.req.Hub
	if err == nil && hub == nil {
		hub, err = hfhub.FromEnv()
	}
	if err != nil {
		r.tried = append(r.tried, err.Error())
		hub = nil
	}
	if hub != nil {
		path, err := hfhub.Cached(hub.CacheDir, repo, "tokenizer.json")
		if err != nil {
			r.tried = append(r.tried, err.Error())
		} else if t, err := r.load(path); t != nil || err != nil {
			return t, Origin{Kind: OriginCache}, err
		}
	}
	if v := familyVariant(r.req.Model); v != "" {
		if r.req.SHA256 == "" {
			t, err := Embedded(v)
			return t, Origin{Kind: OriginEmbedded, Note: fmt.Sprintf("output tokens were counted with the embedded %s tokenizer.json, of the family of %s, whose own file was not in the Hugging Face cache", v, r.req.Model)}, err
		}
		r.tried = append(r.tried, "the embedded file has sha256 "+EmbeddedSHA256)
	}
	if hub != nil {
		if t, o, err := r.download(ctx, hub, repo); t != nil || err != nil {
			return t, o, err
		}
	}
	return nil, Origin{}, &NotFoundError{Model: r.req.Model, SHA256: r.req.SHA256, Tried: r.tried}
}

// repo is the request's model as a Hub repository at its revision.
func (r *resolver) repo() (hfhub.Repo, error) {
	repo, err := hfhub.ParseRepo(r.req.Model)
	if err != nil {
		return repo, err
	}
	if rev := r.req.Revision; rev != "" {
		if repo.Revision != "" && repo.Revision != rev {
			return repo, fmt.Errorf("model %s names revision %s, and revision %s is given too", r.req.Model, repo.Revision, rev)
		}
		repo.Revision = rev
	}
	return repo, nil
}

// download fetches the model's tokenizer.json from the Hub into the cache
// and loads it; nil and no error when the Hub has none to give (what it
// said is noted), or when the context ended.
func (r *resolver) download(ctx context.Context, hub *hfhub.Client, repo hfhub.Repo) (*Tokenizer, Origin, error) {
	d, err := hub.Download(ctx, repo, "tokenizer.json")
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, Origin{}, fmt.Errorf("downloading the tokenizer of %s: %w", repo, cerr)
		}
		r.tried = append(r.tried, err.Error())
		return nil, Origin{}, nil
	}
	t, err := r.load(d.Path)
	o := Origin{Kind: OriginHub, Note: fmt.Sprintf("tokenizer.json of %s at commit %s was downloaded from %s into the Hugging Face cache", repo.ID, d.Commit, hub.Shown())}
	// Its tokenizer_config.json goes beside it, where the chat template a
	// client-side rendering needs (vLLM's custom dataset) is read; a repo
	// without one loses nothing else, so its absence is not an error here.
	if _, cerr := hub.Download(ctx, hfhub.Repo{ID: repo.ID, Revision: d.Commit}, "tokenizer_config.json"); cerr == nil {
		o.Note += ", with its tokenizer_config.json"
	}
	return t, o, err
}

// qwenFamily matches the model ids of the embedded file's family: Qwen2,
// Qwen2.5 and Qwen3 (not Qwen3.5 or later, whose vocabulary differs).
var qwenFamily = regexp.MustCompile(`(?i)(?:^|[^a-z0-9])qwen(2|2\.5|3)(?:$|[^0-9.])`)

// familyVariant is the embedded variant of a Qwen2/2.5/3 model id, ""
// for any other id.
func familyVariant(model string) string {
	m := qwenFamily.FindStringSubmatch(model)
	switch {
	case m == nil:
		return ""
	case m[1] == "3":
		return VariantQwen3
	}
	return VariantQwen25
}
