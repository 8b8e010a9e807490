package k8s

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/config"
)

// TestCheckServers: only servers reached at base_url, with no password,
// run as N workers; their API key variables are read from the Secret.
func TestCheckServers(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"servers:\n  - {name: a, base_url: 'http://x:8000', api_key_env: K}\n  - {name: b, base_url: 'http://y:8000', api_key_env: K}\n", ""},
		{"servers:\n  - {name: a, launch: [x, '{port}']}\n", "r.yaml: servers[0] (a): has launch"},
		{"servers:\n  - {name: a, base_url: 'http://u:pw@x:8000'}\n", "r.yaml: servers[0] (a): base_url http://[redacted]@x:8000 carries a password"},
	} {
		cfg, err := config.Parse([]byte("model: {id: m}\n"+c.yaml), "r.yaml", ".")
		if err != nil {
			t.Fatal(err)
		}
		var s Spec
		err = s.CheckServers("r.yaml", cfg)
		switch {
		case c.want == "" && (err != nil || len(s.APIKeyEnvs) != 1 || s.APIKeyEnvs[0] != "K"):
			t.Errorf("%q: %v, api key envs %v", c.yaml, err, s.APIKeyEnvs)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%q: got %v, want %q", c.yaml, err, c.want)
		}
	}
}

// TestShipRehearsal: the file is shipped whole; a file it reads by an
// absolute path is a warning, by a relative one an error.
func TestShipRehearsal(t *testing.T) {
	var s Spec
	data := "model: {id: m}\nworkload: {prompts: {path: /data/p.jsonl}}\ntokenizer: {path: /tok/tokenizer.json}\n"
	warnings, err := s.ShipRehearsal("dir/r.yaml", []byte(data))
	if err != nil || len(warnings) != 2 || !strings.Contains(warnings[1], "tokenizer.path /tok/tokenizer.json is read here") {
		t.Fatalf("%v %q", err, warnings)
	}
	if s.File == nil || s.File.Name != "r.yaml" || s.File.Content != data {
		t.Errorf("file %+v", s.File)
	}
	var r Spec
	warnings, err = r.ShipRehearsal("r.yaml", []byte("workload: {prompts: /data/p.txt}\ntokenizer: {path: tok.json}\n"))
	if err == nil || !strings.Contains(err.Error(), `tokenizer.path "tok.json": a relative path`) || len(warnings) != 1 || r.File != nil {
		t.Errorf("%v %q %+v", err, warnings, r.File)
	}
}
