package rehearsal

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
)

// runtimeKeys are the names a server may report its software versions
// under: the reference servers' /v1/models "rehearse" object uses the
// package names.
var runtimeKeys = []string{"python", "torch", "transformers", "vllm", "cuda", "tokenizers", "aiohttp", "sglang", "tensorrt_llm"}

// serverRuntimes asks a ready server what software it runs: vLLM's
// GET /version ({"version": ...}) and the reference servers' /v1/models
// entries, whose "rehearse" object carries package versions. A server that
// reports nothing gives nothing; failures are not errors.
func serverRuntimes(ctx context.Context, client *http.Client, server, baseURL, apiKey string) []bundle.Runtime {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	get := func(path string, v any) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(baseURL, "/")+path, nil)
		if err != nil {
			return false
		}
		if apiKey != "" {
			req.Header.Set("Authorization", "Bearer "+apiKey)
		}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return false
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return err == nil && json.Unmarshal(body, v) == nil
	}
	var out []bundle.Runtime
	var version struct {
		Version string `json:"version"`
	}
	if get("/version", &version) && version.Version != "" {
		out = append(out, bundle.Runtime{Name: "vllm", Version: version.Version, Server: server})
	}
	var models struct {
		Data []struct {
			Rehearse map[string]any `json:"rehearse"`
		} `json:"data"`
	}
	if get("/v1/models", &models) && len(models.Data) > 0 {
		info := models.Data[0].Rehearse
		var names []string
		for _, k := range runtimeKeys {
			if v, ok := info[k]; ok && fmt.Sprint(v) != "" {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		for _, k := range names {
			out = append(out, bundle.Runtime{Name: k, Version: fmt.Sprint(info[k]), Server: server})
		}
	}
	return out
}
