package rehearsal

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/supervise"
)

// checkServedModels asks every server already running (not launched) that
// names a model whether its GET /v1/models serves it, and each model the
// prompts are assigned (LoRA adapters, which vLLM lists there too), once Run's own checks
// of the plan passed and before it makes the bundle's folder: a list that
// does not refuses the rehearsal (a *stream.ModelNotServedError) before any
// request. A server that does not answer yet, or answers no list, goes on;
// readiness checks the model again (supervise.Probe), for launched servers
// too, and the runner refuses there (Outcome.Refused).
func checkServedModels(ctx context.Context, cfg *config.Rehearsal) error {
	for _, s := range cfg.Servers {
		if s.Launched() || s.Model == "" {
			continue
		}
		apiKey := ""
		if s.APIKeyEnv != "" {
			k, err := config.APIKey(s.APIKeyEnv)
			if err != nil {
				continue // the server's own run names it
			}
			apiKey = k
		}
		urls := []string{s.BaseURL}
		if len(s.BaseURLs) > 1 {
			urls = s.BaseURLs
		}
		models := []string{s.Model}
		if m := cfg.Workload.Models; m != nil {
			models = append(models, m.Names...) // LoRA adapters are listed as models
		}
		for _, u := range urls {
			if u == "" {
				continue
			}
			for _, model := range slices.Compact(slices.Clone(models)) {
				probe := supervise.Probe{Name: s.Name, BaseURL: u, Model: model, APIKey: apiKey, Client: httpClient(s.InsecureTLS, 5*time.Second)}
				if err := supervise.CheckModel(ctx, probe); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// refuse ends the rehearsal at server i when its readiness found that it
// does not serve the model the rehearsal names (err holds a
// *stream.ModelNotServedError): bad input, so no request is sent to it and
// the servers after it are not rehearsed; the bundle keeps what was
// recorded before, and Outcome.Refused says why. false when err is
// another failure.
func (r *runner) refuse(i int, err error) bool {
	nse, ok := errors.AsType[*stream.ModelNotServedError](err)
	if !ok {
		return false
	}
	name := r.cfg.Servers[i].Name
	r.note("server %s was not rehearsed: %s", name, strings.TrimPrefix(nse.Error(), name+": "))
	for _, s := range r.cfg.Servers[i+1:] {
		r.note("server %s was not rehearsed: the rehearsal stopped at server %s's model", s.Name, r.cfg.Servers[i].Name)
	}
	r.out.Refused = nse
	return true
}
