package rehearsal

import (
	"crypto/tls"
	"net/http"
	"time"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/stream"
)

// insecureTLS reports whether a server of cfg skips the verification of
// its TLS certificate (vLLM's --insecure). The waves' client is one per
// rehearsal: it then verifies no server's certificate.
func insecureTLS(cfg *config.Rehearsal) bool {
	for _, s := range cfg.Servers {
		if s.InsecureTLS {
			return true
		}
	}
	return false
}

// insecureConfig is the TLS configuration that accepts any certificate.
func insecureConfig() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // --insecure asks for it, for self-signed servers
}

// httpClient is the client of the rehearsal's own requests to a server
// (readiness, the model list, /tokenize, what it runs): nil (each caller's
// default) unless the server's certificate is not to be verified.
func httpClient(insecure bool, timeout time.Duration) *http.Client {
	if !insecure {
		return nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = insecureConfig()
	return &http.Client{Transport: tr, Timeout: timeout}
}

// orDefault is c, or http.DefaultClient for nil.
func orDefault(c *http.Client) *http.Client {
	if c == nil {
		return http.DefaultClient
	}
	return c
}

// wavesClient is the stream client of the waves: nil (the driver's own,
// verifying certificates) unless a server's is not to be verified.
func wavesClient(cfg *config.Rehearsal) *stream.Client {
	if !insecureTLS(cfg) {
		return nil
	}
	return stream.NewClient(insecureConfig())
}
