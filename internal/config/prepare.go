package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Launch is what starts one replica of a launched server, placeholders
// substituted: its argv (and as the bundle shows it), its environment
// overrides, and its prepare commands (and as shown).
type Launch struct {
	Argv, ShownArgv       []string
	Env                   map[string]string
	Prepare, ShownPrepare [][]string
}

// ReplicaLaunch is the launch of replica i of s listening on port, with
// {scratch_dir} the folder scratch: a fresh folder rehearse makes for the
// replica and removes after it stops (for an engine's state: ollama's
// HOME and OLLAMA_MODELS). CUDA_VISIBLE_DEVICES is set to the replica's
// GPU set when the server has gpus.
func (r *Rehearsal) ReplicaLaunch(s Server, replica, port int, rehearseExe, scratch string) Launch {
	ph := placeholders{port: port, exe: rehearseExe, replica: replica, gpus: s.GPUList(replica), scratch: scratch}
	shownPH := ph
	shownPH.exe = "rehearse"
	l := Launch{Argv: r.substitute(s.Launch, ph), ShownArgv: RedactArgv(r.substitute(s.Launch, shownPH))}
	if len(s.Env) > 0 || len(s.GPUs) > 0 {
		l.Env = make(map[string]string, len(s.Env)+1)
		for k, v := range s.Env {
			l.Env[k] = r.substitute([]string{v}, ph)[0]
		}
		if len(s.GPUs) > 0 {
			l.Env["CUDA_VISIBLE_DEVICES"] = s.GPUList(replica)
		}
	}
	for _, argv := range s.Prepare {
		l.Prepare = append(l.Prepare, r.substitute(argv, ph))
		l.ShownPrepare = append(l.ShownPrepare, RedactArgv(r.substitute(argv, shownPH)))
	}
	return l
}

// UsesScratch reports whether the server's launch, environment or prepare
// commands name {scratch_dir}, so that rehearse makes the folder.
func (s Server) UsesScratch() bool {
	const ph = "{scratch_dir}"
	has := func(argv []string) bool {
		return slices.ContainsFunc(argv, func(a string) bool { return strings.Contains(a, ph) })
	}
	return has(s.Launch) || has(slices.Collect(maps.Values(s.Env))) || slices.ContainsFunc(s.Prepare, has)
}

// validatePrepare checks a server's prepare commands.
func validatePrepare(at string, s Server, p *Problems) {
	if len(s.Prepare) > 0 && !s.Launched() {
		p.add(at+".prepare", "only a server rehearse launches can be prepared (this one has no launch)")
	}
	for i, argv := range s.Prepare {
		if len(argv) == 0 || strings.TrimSpace(argv[0]) == "" {
			p.add(fmt.Sprintf("%s.prepare[%d]", at, i), "empty program name (each entry is an argv: [program, arg, ...])")
		}
	}
	if s.UsesScratch() && !s.Launched() {
		p.add(at, "{scratch_dir} is a folder rehearse makes for a server it launches; this one has no launch")
	}
}
