package config

import (
	"slices"
	"testing"

	"github.com/rehearse/rehearse/internal/secret"
)

// TestSecretsInsideAShellString: a launch that goes through a shell
// carries its flags and variables inside one argv item; their secret
// values are redacted in the shown argv, quotes kept, and handed to the
// scrubbers as the process sees them.
func TestSecretsInsideAShellString(t *testing.T) {
	const r = secret.Redacted
	for _, c := range []struct {
		name   string
		argv   []string
		shown  []string
		values []string
	}{
		{"flag and value", []string{"sh", "-c", "vllm serve m --api-key sk-1234 --port 8000"},
			[]string{"sh", "-c", "vllm serve m --api-key " + r + " --port 8000"}, []string{"sk-1234"}},
		{"flag=value", []string{"sh", "-c", "exec vllm serve m --api-key=sk-1234; echo done"},
			[]string{"sh", "-c", "exec vllm serve m --api-key=" + r + "; echo done"}, []string{"sk-1234"}},
		{"single-quoted value", []string{"bash", "-lc", "vllm serve m --api-key 'sk 1234' --dtype half"},
			[]string{"bash", "-lc", "vllm serve m --api-key '" + r + "' --dtype half"}, []string{"sk 1234"}},
		{"double-quoted value with an escape", []string{"sh", "-c", `vllm serve --hf-token="hf_a\"b" m`},
			[]string{"sh", "-c", `vllm serve --hf-token="` + r + `" m`}, []string{`hf_a"b`, `hf_a\"b`}},
		{"secret-named variable", []string{"sh", "-c", "FOO_TOKEN=abc123 HF_HOME=/data vllm serve m"},
			[]string{"sh", "-c", "FOO_TOKEN=" + r + " HF_HOME=/data vllm serve m"}, []string{"abc123"}},
		{"export, then the flag", []string{"sh", "-c", "export HF_TOKEN='hf_xyz'; exec vllm serve m --api-key sk-9999"},
			[]string{"sh", "-c", "export HF_TOKEN='" + r + "'; exec vllm serve m --api-key " + r}, []string{"hf_xyz", "sk-9999"}},
		{"a shell inside the shell", []string{"sh", "-c", `bash -c "vllm serve m --api-key sk-inner"`},
			[]string{"sh", "-c", `bash -c "vllm serve m --api-key ` + r + `"`}, []string{"sk-inner"}},
		{"a variable's expansion is not the secret", []string{"sh", "-c", `vllm serve m --api-key "$KEY" --hf-token=$HF_TOKEN`},
			[]string{"sh", "-c", `vllm serve m --api-key "$KEY" --hf-token=$HF_TOKEN`}, nil},
		{"a flag without a value", []string{"sh", "-c", "vllm serve m --api-key --port 1"},
			[]string{"sh", "-c", "vllm serve m --api-key --port 1"}, nil},
		{"env assignment as its own item", []string{"env", "HF_TOKEN=hf_item", "vllm", "serve", "m"},
			[]string{"env", "HF_TOKEN=" + r, "vllm", "serve", "m"}, []string{"hf_item"}},
		{"separate items as before", []string{"vllm", "serve", "m", "--api-key", "sk-1", "--hf-token=hf_x"},
			[]string{"vllm", "serve", "m", "--api-key", r, "--hf-token=" + r}, []string{"sk-1", "hf_x"}},
		{"nothing secret", []string{"sh", "-c", "TOKENIZERS_PARALLELISM=false vllm serve m --tokenizer-file t.json"},
			[]string{"sh", "-c", "TOKENIZERS_PARALLELISM=false vllm serve m --tokenizer-file t.json"}, nil},
		{"an unclosed quote", []string{"sh", "-c", "vllm --api-key 'sk-open"},
			[]string{"sh", "-c", "vllm --api-key " + r}, []string{"sk-open", "'sk-open"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := RedactArgv(c.argv); !slices.Equal(got, c.shown) {
				t.Errorf("RedactArgv(%q)\n got %q\nwant %q", c.argv, got, c.shown)
			}
			if got := SecretValues(nil, "", c.argv); !slices.Equal(got, c.values) {
				t.Errorf("SecretValues(%q) = %q, want %q", c.argv, got, c.values)
			}
		})
	}
}

func FuzzShellSecrets(f *testing.F) {
	f.Add("FOO_TOKEN=abc vllm serve m --api-key 'X y' --hf-token=\"z\\\"w\"; echo $KEY")
	f.Add(`bash -c "a --api-key 'b c'"`)
	f.Fuzz(func(t *testing.T, script string) {
		argv := []string{"sh", "-c", script, "--api-key", "sk-tail"}
		shown := RedactArgv(argv)
		if len(shown) != len(argv) || shown[4] != secret.Redacted {
			t.Fatalf("RedactArgv(%q) = %q", argv, shown)
		}
		_ = SecretValues(nil, "", argv)
	})
}
