package config

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/secret"
)

// TestReplicaLaunchSubstitutesEverywhere: placeholders are substituted in
// the argv, the environment's values and the prepare commands, with
// {scratch_dir} the replica's folder; the shown forms redact secrets and
// show {rehearse} as "rehearse".
func TestReplicaLaunchSubstitutesEverywhere(t *testing.T) {
	r, err := parseServer(t, `  - name: ollama
    launch: [ollama, serve]
    env: {OLLAMA_HOST: "127.0.0.1:{port}", OLLAMA_MODELS: "{scratch_dir}/models", HOME: "{scratch_dir}"}
    ready: {path: /api/version}
    prepare:
      - [ollama, create, "{model}", -f, "{config_dir}/Modelfile"]
      - ["{rehearse}", tokens, --api-key, sk-secret]
`)
	if err != nil {
		t.Fatal(err)
	}
	s := r.Servers[0]
	if !s.UsesScratch() {
		t.Fatal("UsesScratch false for a server whose env names {scratch_dir}")
	}
	l := r.ReplicaLaunch(s, 0, 4321, "/bin/rh", "/tmp/s0")
	wantEnv := map[string]string{"OLLAMA_HOST": "127.0.0.1:4321", "OLLAMA_MODELS": "/tmp/s0/models", "HOME": "/tmp/s0"}
	if !maps.Equal(l.Env, wantEnv) || !slices.Equal(l.Argv, []string{"ollama", "serve"}) {
		t.Errorf("env %v, argv %q", l.Env, l.Argv)
	}
	if len(l.Prepare) != 2 || !slices.Equal(l.Prepare[0], []string{"ollama", "create", "m", "-f", "/cfg/Modelfile"}) ||
		!slices.Equal(l.Prepare[1], []string{"/bin/rh", "tokens", "--api-key", "sk-secret"}) {
		t.Errorf("prepare %q", l.Prepare)
	}
	if got := l.ShownPrepare[1]; !slices.Equal(got, []string{"rehearse", "tokens", "--api-key", secret.Redacted}) {
		t.Errorf("shown prepare %q", got)
	}
	plain, err := parseServer(t, `  - {name: s, launch: [srv, "{port}"], env: {A: "b"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Servers[0].UsesScratch() {
		t.Error("UsesScratch true for a server that names no {scratch_dir}")
	}
}

func TestPrepareValidation(t *testing.T) {
	for _, c := range []struct{ server, want string }{
		{`  - {name: a, base_url: "http://h:1", prepare: [[x]]}`, "servers[0].prepare: only a server rehearse launches"},
		{`  - {name: a, launch: [s, "{port}"], prepare: [[]]}`, "servers[0].prepare[0]: empty program name"},
		{`  - {name: a, launch: [s, "{port}"], prepare: [["", x]]}`, "servers[0].prepare[0]: empty program name"},
		{`  - {name: a, base_url: "http://h:1", env: {HOME: "{scratch_dir}"}}`, "servers[0]: {scratch_dir} is a folder rehearse makes"},
	} {
		_, err := parseServer(t, c.server)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v; want %q", c.server, err, c.want)
		}
	}
}
