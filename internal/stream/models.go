package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

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
	models, err := ParseModels(data)
	if err != nil {
		return Model{}, fmt.Errorf("GET %s: not a model list: %v", url, err)
	}
	if len(models) == 0 || models[0].ID == "" {
		return Model{}, fmt.Errorf("GET %s: no model served", url)
	}
	m := models[0]
	m.MaxModelLen = max(0, m.MaxModelLen)
	return m, nil
}

// ParseModels reads an answer of GET /v1/models, OpenAI's model list
// ({"data": [{"id": ...}, ...]}): the models it names, in order. It is an
// error when the answer is not such a list (a server without the route
// may answer it with a page, or JSON of another shape).
func ParseModels(data []byte) ([]Model, error) {
	var list struct {
		Data *[]Model `json:"data"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, err
	}
	if list.Data == nil {
		return nil, errors.New(`no "data" list`)
	}
	return *list.Data, nil
}

// LatestTag is the tag ollama lists a model under when it was named
// without one: NAME is listed as NAME:latest.
const LatestTag = ":latest"

// Serves reports whether models serve the model name: one of them has
// that id, or the two differ only by a LatestTag (ollama serves NAME as
// NAME:latest, and answers requests for either).
func Serves(models []Model, name string) bool {
	base := strings.TrimSuffix(name, LatestTag)
	for _, m := range models {
		if m.ID == name || strings.TrimSuffix(m.ID, LatestTag) == base {
			return true
		}
	}
	return false
}

// ModelNotServedError is a model a rehearsal names that the server's GET
// /v1/models list does not serve (Serves): the rehearsal's input is wrong,
// and it stops before any request.
type ModelNotServedError struct {
	// Server names the server, the message's prefix ("" for none).
	Server string
	Model  string
	// Served are the ids the list names.
	Served []string
}

func (e *ModelNotServedError) Error() string {
	served := "no model"
	if len(e.Served) > 0 {
		q := make([]string, len(e.Served))
		for i, id := range e.Served {
			q[i] = strconv.Quote(id)
		}
		served = strings.Join(q, ", ")
	}
	msg := fmt.Sprintf("model %q is not served: the server's GET /v1/models lists %s", e.Model, served)
	if e.Server != "" {
		msg = e.Server + ": " + msg
	}
	return msg
}

// CheckServed is nil when models serve name (Serves), else a
// *ModelNotServedError naming server, name and the models served.
func CheckServed(server string, models []Model, name string) error {
	if Serves(models, name) {
		return nil
	}
	ids := make([]string, len(models))
	for i, m := range models {
		ids[i] = m.ID
	}
	return &ModelNotServedError{Server: server, Model: name, Served: ids}
}
