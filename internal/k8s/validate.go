package k8s

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// maxConfigMap is the most data a ConfigMap holds (1 MiB, less room
// for its metadata).
const maxConfigMap = 1000 * 1000

// Validate checks the spec before any manifest is written: one error
// naming the field and the value.
func (s Spec) Validate() error {
	switch {
	case s.Workers < 1:
		return fmt.Errorf("workers %d: want at least 1", s.Workers)
	case s.Image == "":
		return fmt.Errorf("image: empty (the image must have rehearse on its PATH)")
	case len(s.Args) == 0:
		return fmt.Errorf("no worker command (run or bench)")
	case s.Port < 0 || s.Port > 65535:
		return fmt.Errorf("port %d: want 1 to 65535", s.Port)
	}
	if errs := validation.IsDNS1123Label(s.Name); len(errs) > 0 {
		return fmt.Errorf("name %q: %s", s.Name, errs[0])
	}
	// The longest derived name is a Service's: a DNS-1035 label.
	if errs := validation.IsDNS1035Label(s.ServiceName()); len(errs) > 0 {
		return fmt.Errorf("name %q: the Service %q it names is not valid: %s", s.Name, s.ServiceName(), errs[0])
	}
	names := []struct {
		what, v string
		check   func(string) []string
	}{
		{"namespace", s.Namespace, validation.IsDNS1123Label},
		{"pvc", s.PVC, validation.IsDNS1123Subdomain},
		{"service account", s.ServiceAccount, validation.IsDNS1123Subdomain},
		{"api key secret", s.APIKeySecret, validation.IsDNS1123Subdomain},
		{"coordinator token secret", s.TokenSecret, validation.IsDNS1123Subdomain},
	}
	for _, n := range names {
		if n.v == "" {
			continue
		}
		if errs := n.check(n.v); len(errs) > 0 {
			return fmt.Errorf("%s %q: %s", n.what, n.v, errs[0])
		}
	}
	if len(s.APIKeyEnvs) > 0 && s.APIKeySecret == "" {
		return fmt.Errorf("api key secret: empty, but the workers need %s", s.APIKeyEnvs[0])
	}
	for _, env := range s.APIKeyEnvs {
		if errs := validation.IsConfigMapKey(env); len(errs) > 0 {
			return fmt.Errorf("api key variable %q: not a Secret key: %s", env, errs[0])
		}
	}
	if s.File != nil {
		if errs := validation.IsConfigMapKey(s.File.Name); len(errs) > 0 {
			return fmt.Errorf("rehearsal file name %q: not a ConfigMap key: %s", s.File.Name, errs[0])
		}
		if len(s.File.Content) > maxConfigMap {
			return fmt.Errorf("rehearsal file %s: %d bytes, over the %d a ConfigMap holds (put inline prompts in a file in the image)", s.File.Name, len(s.File.Content), maxConfigMap)
		}
	}
	if s.StartAt != "" {
		if _, err := time.Parse(time.RFC3339, s.StartAt); err != nil {
			return fmt.Errorf("start-at %q: want an RFC 3339 instant such as 2026-12-01T20:00:00Z", s.StartAt)
		}
	}
	if s.Storage.Sign() < 0 {
		return fmt.Errorf("storage %s: want a positive size such as 10Gi", s.Storage.String())
	}
	return nil
}
