package rehearsal

import (
	"context"
	"errors"
	"net"
	"net/url"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/provenance"
	"github.com/rehearse/rehearse/internal/secret"
	"github.com/rehearse/rehearse/internal/stream"
)

// Provenance is the header's provenance before any server ran, for run,
// demo and bench alike: the tool from build info (provenance.Tool), the command as the caller names it,
// the host, its GPUs, the tokenizer, the simulated servers, and the price
// the cost figures rest on. The notes
// say what could not be described, and that GPUs listed are this
// machine's when a server is reached elsewhere. Model, times and the
// output-token source are filled in by Run.
func Provenance(ctx context.Context, cfg *config.Rehearsal, command []string, tok bundle.Tokenizer) (bundle.Provenance, []string) {
	var notes []string
	gpus, err := provenance.GPUs(ctx)
	if err != nil {
		notes = append(notes, "nvidia-smi failed, so no GPU is described: "+err.Error())
	}
	if len(gpus) > 0 {
		for _, s := range cfg.Servers {
			if !s.Launched() && !isLoopback(s.BaseURL) {
				notes = append(notes, "the GPUs listed are those of the machine that ran rehearse; the endpoint "+config.RedactURL(s.BaseURL)+" may run elsewhere")
			}
		}
	}
	return bundle.Provenance{
		Tool:       provenance.Tool(),
		Command:    command,
		Host:       provenance.Host(),
		GPUs:       gpus,
		Tokenizer:  tok,
		Simulation: Simulation(cfg),
		Cost:       costBasis(cfg.Cost),
	}, notes
}

// costBasis is provenance.cost of a rehearsal's cost: (nil: none).
func costBasis(c *config.Cost) *bundle.CostBasis {
	if c == nil {
		return nil
	}
	return &bundle.CostBasis{GPUHourUSD: c.GPUHourUSD, GPUs: c.GPUs}
}

// FirstModel is the first model the server at baseURL lists on GET
// /v1/models, with the max_model_len it reports there (vLLM does; 0 when
// the server reports none). Its error may quote the server's answer: the
// API key and the URL's password are scrubbed from it.
func FirstModel(ctx context.Context, baseURL, apiKey string, insecure bool) (stream.Model, error) {
	c := stream.NewClient(nil)
	if insecure {
		c = stream.NewClient(insecureConfig())
	}
	defer c.Close()
	m, err := c.FirstModel(ctx, baseURL, apiKey)
	if err != nil {
		if msg, changed := secret.New(apiKey, urlSecret(baseURL)).Scrub(err.Error()); changed {
			// Not wrapped: the error's own text holds the secret.
			err = errors.New(msg)
		}
	}
	return m, err
}

func isLoopback(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}
