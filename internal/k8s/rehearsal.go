package k8s

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"

	"github.com/goccy/go-yaml"

	"github.com/rehearse/rehearse/internal/config"
)

// CheckServers checks the servers of the rehearsal file the workers run
// (rehearse k8s ... run -f FILE), loaded as cfg: each must be reached at
// base_url (a launched server would be launched by every worker), with
// no password in a URL (the manifests would hold it); each api_key_env is
// added to s.APIKeyEnvs, to be read from the API key Secret. An error
// names the file and the server.
func (s *Spec) CheckServers(file string, cfg *config.Rehearsal) error {
	for i, sv := range cfg.Servers {
		at := fmt.Sprintf("%s: servers[%d] (%s)", file, i, sv.Name)
		if sv.Launched() {
			return fmt.Errorf("%s: has launch: each of the N workers would launch its own; under rehearse k8s a server is reached at base_url", at)
		}
		if err := NoPassword(sv.BaseURL); err != nil {
			return fmt.Errorf("%s: base_url %v", at, err)
		}
		for j, u := range sv.BaseURLs {
			if err := NoPassword(u); err != nil {
				return fmt.Errorf("%s: base_urls[%d] %v", at, j, err)
			}
		}
		if sv.APIKeyEnv != "" && !slices.Contains(s.APIKeyEnvs, sv.APIKeyEnv) {
			s.APIKeyEnvs = append(s.APIKeyEnvs, sv.APIKeyEnv)
		}
	}
	return nil
}

// ShipRehearsal ships the rehearsal file (its content data) in the
// ConfigMap (s.File), once the files it reads besides itself, as written
// in it, are checked: a relative path would be looked for beside the
// mounted file, where only the file is (an error); an absolute one must
// be in the image or a volume (a warning, returned with any error).
func (s *Spec) ShipRehearsal(file string, data []byte) (warnings []string, err error) {
	var raw struct {
		Workload struct {
			Prompts any `yaml:"prompts"`
		} `yaml:"workload"`
		Tokenizer struct {
			Path string `yaml:"path"`
		} `yaml:"tokenizer"`
	}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	prompts, _ := raw.Workload.Prompts.(string)
	if m, ok := raw.Workload.Prompts.(map[string]any); ok {
		prompts, _ = m["path"].(string)
	}
	for _, f := range []struct{ key, path string }{{"workload.prompts", prompts}, {"tokenizer.path", raw.Tokenizer.Path}} {
		switch {
		case f.path == "":
		case !filepath.IsAbs(f.path):
			return warnings, fmt.Errorf("%s: %s %q: a relative path would be read beside the file in the ConfigMap (%s), where only the file is: give the absolute path of a file in the image or a mounted volume", file, f.key, f.path, RehearsalDir)
		default:
			warnings = append(warnings, fmt.Sprintf("%s: %s %s is read here and must be at that same path in the worker image or a mounted volume", file, f.key, f.path))
		}
	}
	s.File = &File{Name: filepath.Base(file), Content: string(data)}
	return warnings, nil
}

// NoPassword refuses a URL with a password: the manifests would carry it.
func NoPassword(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return nil
	}
	if _, ok := u.User.Password(); ok {
		return fmt.Errorf("%s carries a password, which the manifests would hold: use api_key_env and a Secret", config.RedactURL(raw))
	}
	return nil
}
