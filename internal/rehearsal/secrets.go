package rehearsal

import (
	"net/url"
	"os"
	"strings"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/secret"
	"github.com/rehearse/rehearse/internal/stream"
)

// rehearsalSecrets are the values nothing the rehearsal writes may hold:
// each server's API key, the values its launch argv and environment (and
// its router's) redact, and the passwords of its URLs. They are scrubbed
// from records (drive.Target.Secrets), notes, failures and progress lines;
// nil when there are none.
func rehearsalSecrets(cfg *config.Rehearsal) *secret.Set {
	var values []string
	for _, s := range cfg.Servers {
		if s.APIKeyEnv != "" {
			values = append(values, os.Getenv(s.APIKeyEnv))
		}
		for _, h := range s.Headers {
			values = append(values, h.Value)
		}
		values = append(values, config.SecretValues(s.Env, s.APIKeyEnv, s.Launch)...)
		urls := append([]string{s.BaseURL}, s.BaseURLs...)
		if rt := s.Router; rt != nil {
			values = append(values, config.SecretValues(rt.Env, s.APIKeyEnv, rt.Launch)...)
			urls = append(urls, rt.BaseURL)
		}
		for _, u := range urls {
			values = append(values, urlSecret(u))
		}
	}
	return secret.New(values...)
}

// streamHeaders are a server's headers as its requests send them.
func streamHeaders(hs []config.Header) []stream.Header {
	var out []stream.Header
	for _, h := range hs {
		out = append(out, stream.Header{Name: h.Name, Value: h.Value})
	}
	return out
}

// urlSecret is the secret of a URL's userinfo (config.RedactURL hides it
// where the URL is shown): its password, or the user name where there is
// no password (a token is often written there); "" for none.
func urlSecret(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return ""
	}
	if p, ok := u.User.Password(); ok {
		return p
	}
	return u.User.Username()
}

// serverSecrets are the values scrubbed from a launched server's log: its
// environment's secrets (inherited ones too: a launcher may print them all),
// its argv's, and the API key.
func serverSecrets(s config.Server, argv []string, apiKey string) []string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	for k, v := range s.Env {
		env[k] = v
	}
	return append(config.SecretValues(env, s.APIKeyEnv, argv), apiKey)
}
