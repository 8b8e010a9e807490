package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ServedModel asks GET {baseURL}/v1/models for the id of the first model
// served, for a caller that was not told which model to request.
func (c *Client) ServedModel(ctx context.Context, baseURL, apiKey string) (string, error) {
	m, err := c.FirstModel(ctx, baseURL, apiKey)
	return m.ID, err
}

// Model is one entry of GET /v1/models.
type Model struct {
	ID string `json:"id"`
	// MaxModelLen is the context length vLLM reports with each model; 0
	// when the server reports none.
	MaxModelLen int `json:"max_model_len"`
}

// FirstModel asks GET {baseURL}/v1/models for the first model served.
func (c *Client) FirstModel(ctx context.Context, baseURL, apiKey string) (Model, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	url := strings.TrimRight(baseURL, "/") + "/v1/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Model{}, fmt.Errorf("GET %s: %v", url, err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return Model{}, fmt.Errorf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return Model{}, fmt.Errorf("GET %s: HTTP %d: %s", url, resp.StatusCode, errorMessage(data))
	}
	var list struct {
		Data []Model `json:"data"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return Model{}, fmt.Errorf("GET %s: not a model list: %v", url, err)
	}
	if len(list.Data) == 0 || list.Data[0].ID == "" {
		return Model{}, fmt.Errorf("GET %s: no model served", url)
	}
	m := list.Data[0]
	m.MaxModelLen = max(0, m.MaxModelLen)
	return m, nil
}
