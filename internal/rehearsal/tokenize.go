package rehearsal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// tokenizeCheck asks a server that offers vLLM's POST /tokenize how many
// tokens text is ({"model", "prompt", "add_special_tokens": false}, as
// Count counts, answered {"count", "tokens"}) and returns one line of
// warning when the rehearsal's counter says otherwise: its output tokens
// would then not be the server's. "" when they agree, when there is no
// counter, or when the server offers no /tokenize.
func tokenizeCheck(ctx context.Context, client *http.Client, baseURL, apiKey, model, text string, c Counter) string {
	if c == nil || text == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, err := json.Marshal(map[string]any{"model": model, "prompt": text, "add_special_tokens": false})
	if err != nil {
		return ""
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(baseURL, "/")+"/tokenize", bytes.NewReader(body))
	if err != nil {
		return ""
	}
	req.Header.Set("Content-Type", "application/json")
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var answer struct {
		Count *int `json:"count"`
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &answer) != nil || answer.Count == nil {
		return ""
	}
	if own := c.Count(text); own != *answer.Count {
		return fmt.Sprintf("the server's /tokenize counts %d tokens in the first prompt, rehearse's tokenizer %d: output tokens are not being counted with the served model's tokenizer (give its own tokenizer.json)", *answer.Count, own)
	}
	return ""
}
