package rehearsal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/promscrape"
	"github.com/rehearse/rehearse/internal/supervise"
)

// fleet is what a server under test is on this machine (SPEC §10): one
// launched process, N replicas and perhaps their router, or nothing
// launched at all (an endpoint already running). Its processes live and
// are stopped together.
type fleet struct {
	group supervise.Group
	// router is the launched router (nil: none launched).
	router *supervise.Process
	// urls are the replicas' base URLs (one for a single process or an
	// endpoint already running); baseURL is where requests go when the
	// client does not balance: the router, or the one process.
	urls    []string
	baseURL string
	// replicated is true for a server of several replicas (the bundle
	// lists them).
	replicated bool
	// logs are the bundle's log files, with the process each belongs to.
	logs []string
	// prepare are each replica's prepare commands (none for an endpoint
	// already running).
	prepare [][]supervise.Command
	// scratch are the {scratch_dir} folders made for the replicas,
	// removed once they are stopped.
	scratch []string
}

// removeScratch removes the replicas' {scratch_dir} folders.
func (f *fleet) removeScratch() {
	for _, d := range f.scratch {
		_ = os.RemoveAll(d)
	}
	f.scratch = nil
}

// replicaScratch makes replica j's {scratch_dir} when the server names one.
func (f *fleet) replicaScratch(s config.Server, j int) (string, error) {
	if !s.UsesScratch() {
		return "", nil
	}
	d, err := os.MkdirTemp("", fmt.Sprintf("rehearse-%s-%d-", s.Name, j))
	if err != nil {
		return "", fmt.Errorf("%s: {scratch_dir}: %w", s.Name, err)
	}
	f.scratch = append(f.scratch, d)
	return d, nil
}

// prepareCommands are a launch's prepare commands as supervise runs them.
func prepareCommands(l config.Launch) []supervise.Command {
	var cs []supervise.Command
	for k, argv := range l.Prepare {
		cs = append(cs, supervise.Command{Argv: argv, Shown: l.ShownPrepare[k]})
	}
	return cs
}

// launched reports whether rehearse launched any process of the server.
func (f *fleet) launched() bool { return f != nil && f.group.Len() > 0 }

// label names process k of the fleet in notes: "" for a single process,
// "replica 1" or "router" otherwise.
func (f *fleet) label(k int) string {
	if !f.replicated && f.router == nil {
		return ""
	}
	return f.group.Label(k)
}

// replicaLog is the bundle's log file of replica j of server name.
func replicaLog(name string, j, n int) string {
	if n == 1 {
		return name + ".log"
	}
	return fmt.Sprintf("%s.replica-%d.log", name, j)
}

// launch starts server i's replicas (each with its own free port, GPU set
// and log), not yet its router; an endpoint already running launches
// nothing. On a failure the replicas started are stopped, the failure is
// noted, and it returns false.
func (r *runner) launch(ctx context.Context, i int, apiKey string) (*fleet, bool) {
	s := r.cfg.Servers[i]
	f := &fleet{baseURL: s.BaseURL}
	if !s.Launched() {
		f.urls = []string{s.BaseURL}
		if len(s.BaseURLs) > 1 {
			// Replicas already running, balanced by the client.
			f.urls, f.replicated = s.BaseURLs, true
			r.setServer(i, func(b *bundle.Server) {
				b.Replicas = make([]bundle.Replica, len(s.BaseURLs))
				for j, u := range s.BaseURLs {
					b.Replicas[j] = bundle.Replica{Index: j, BaseURL: config.RedactURL(u)}
					if j < len(s.GPUs) {
						b.Replicas[j].GPUs = s.GPUs[j]
					}
				}
			})
		}
		return f, true
	}
	n := s.ReplicaCount()
	f.replicated = n > 1
	if f.replicated {
		r.setServer(i, func(b *bundle.Server) { b.Replicas = make([]bundle.Replica, n) })
	}
	for j := range n {
		port := s.Port
		if port == 0 {
			p, err := supervise.FreePort()
			if err != nil {
				r.launchFailed(i, f, err)
				return nil, false
			}
			port = p
		}
		url := s.BaseURL
		if url == "" || f.replicated {
			url = "http://127.0.0.1:" + strconv.Itoa(port)
		}
		f.urls = append(f.urls, url)
		scratch, err := f.replicaScratch(s, j)
		if err != nil {
			r.launchFailed(i, f, err)
			return nil, false
		}
		l := r.cfg.ReplicaLaunch(s, j, port, r.o.RehearseExe, scratch)
		argv, shown, env := l.Argv, l.ShownArgv, l.Env
		f.prepare = append(f.prepare, prepareCommands(l))
		logName := replicaLog(s.Name, j, n)
		r.recordLaunch(i, f, j, url, shown, logName)
		p, err := supervise.Start(ctx, supervise.Spec{
			Name: s.Name, Argv: argv, Env: env, Port: port,
			LogPath: filepath.Join(r.o.Dir, logName), StopGrace: s.StopGrace.D(), ShownArgv: shown,
			Keeper: r.o.RehearseExe, Secrets: serverSecrets(s, argv, apiKey),
		})
		if err != nil {
			if f.replicated {
				err = fmt.Errorf("%s: replica %d: %s", s.Name, j, strings.TrimPrefix(err.Error(), s.Name+": "))
			}
			r.launchFailed(i, f, err)
			return nil, false
		}
		f.group.Add("replica "+strconv.Itoa(j), p)
		f.logs = append(f.logs, logName)
		if r.o.Progress != nil {
			r.o.Progress(Event{Server: s.Name, Step: "launch", PID: p.PID(), Text: fmt.Sprintf("running as pid %d, log %s", p.PID(), logName)})
		}
	}
	if f.replicated {
		f.baseURL = f.urls[0]
	} else if f.baseURL == "" {
		f.baseURL = f.urls[0]
	}
	if s.Router != nil {
		f.baseURL = s.Router.BaseURL
	}
	return f, true
}

// recordLaunch puts replica j of server i (its address, argv and log) in
// the bundle and reports its launch.
func (r *runner) recordLaunch(i int, f *fleet, j int, url string, shown []string, logName string) {
	s := r.cfg.Servers[i]
	if !f.replicated {
		r.setServer(i, func(b *bundle.Server) {
			b.BaseURL, b.LaunchArgv, b.Log = config.RedactURL(url), shown, logName
		})
		r.progress(s.Name, "launch", "launching %s", strings.Join(shown, " "))
		return
	}
	r.setServer(i, func(b *bundle.Server) {
		if j == 0 {
			// The server's own line shows replica 0's.
			b.BaseURL, b.LaunchArgv = config.RedactURL(url), shown
		}
		b.Replicas[j] = bundle.Replica{Index: j, BaseURL: config.RedactURL(url), LaunchArgv: shown, Log: logName}
		if j < len(s.GPUs) {
			b.Replicas[j].GPUs = s.GPUs[j]
		}
	})
	r.progress(s.Name, "launch", "launching replica %d: %s", j, strings.Join(shown, " "))
}

// launchFailed stops what of f was started and notes why server i could
// not be launched.
func (r *runner) launchFailed(i int, f *fleet, err error) {
	s := r.cfg.Servers[i]
	r.stop(i, f)
	r.setServer(i, func(b *bundle.Server) {
		if b.Exit == "" {
			b.Exit = "not launched: " + r.shown(err.Error())
		}
	})
	r.note("server %s could not be launched: %v", s.Name, err)
	r.fail(i, err.Error())
}

// ready waits for every replica of f (together: an engine may take
// minutes to load), then launches server i's router where it has an argv
// and waits for the router. The error names the replica or router, and
// logName its log ("" for an endpoint rehearse did not launch).
func (r *runner) ready(ctx context.Context, i int, f *fleet, apiKey string) (logName string, err error) {
	s := r.cfg.Servers[i]
	if logName, err := r.readyReplicas(ctx, s, f, apiKey); err != nil {
		return logName, err
	}
	if s.Router == nil {
		return "", nil
	}
	return r.readyRouter(ctx, i, f, apiKey)
}

// probe is server s's readiness probe of url, with the prepare commands
// of the process behind it.
func (r *runner) probe(s config.Server, url string, rd config.Ready, apiKey string, prepare []supervise.Command) supervise.Probe {
	return supervise.Probe{
		Name: s.Name, BaseURL: url, HealthPath: rd.Path, Endpoint: r.cfg.Workload.Endpoint,
		Model: s.Model, APIKey: apiKey, Timeout: rd.Timeout.D(), Mode: rd.Mode, Prepare: prepare,
		Client: httpClient(s.InsecureTLS, 10*time.Second),
	}
}

// replicaPrepare is replica j's prepare commands (none for an endpoint
// already running).
func (f *fleet) replicaPrepare(j int) []supervise.Command {
	if j < len(f.prepare) {
		return f.prepare[j]
	}
	return nil
}

// readyReplicas waits for every replica of f together; the log named is
// the one of the replica that was not ready.
func (r *runner) readyReplicas(ctx context.Context, s config.Server, f *fleet, apiKey string) (logName string, err error) {
	if !f.replicated {
		var proc *supervise.Process
		if f.launched() {
			proc = f.group.Proc(0)
			logName = f.logs[0]
		}
		url := f.urls[0]
		if s.Router == nil {
			url = f.baseURL
		}
		return logName, supervise.WaitReady(ctx, proc, r.probe(s, url, s.Ready, apiKey, f.replicaPrepare(0)))
	}
	errs := make([]error, len(f.urls))
	var wg sync.WaitGroup
	for j, url := range f.urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var proc *supervise.Process
			if f.launched() {
				proc = f.group.Proc(j)
			}
			errs[j] = supervise.WaitReady(ctx, proc, r.probe(s, url, s.Ready, apiKey, f.replicaPrepare(j)))
		}()
	}
	wg.Wait()
	for j, e := range errs {
		if e != nil {
			log := ""
			if j < len(f.logs) {
				log = f.logs[j]
			}
			return log, replicaError(j, e)
		}
	}
	return "", nil
}

// readyRouter launches server i's router where it has an argv, and waits
// for the router.
func (r *runner) readyRouter(ctx context.Context, i int, f *fleet, apiKey string) (logName string, err error) {
	s := r.cfg.Servers[i]
	rt := s.Router
	var proc *supervise.Process
	if len(rt.Launch) > 0 {
		port := rt.Port
		if port == 0 {
			p, err := supervise.FreePort()
			if err != nil {
				return "", err
			}
			port = p
		}
		url := rt.BaseURL
		if url == "" {
			url = "http://127.0.0.1:" + strconv.Itoa(port)
		}
		f.baseURL = url
		argv := r.cfg.RouterArgv(s, port, f.urls, r.o.RehearseExe)
		shown := config.RedactArgv(r.cfg.RouterArgv(s, port, f.urls, "rehearse"))
		logName = s.Name + ".router.log"
		r.setServer(i, func(b *bundle.Server) {
			b.Router = &bundle.Router{BaseURL: config.RedactURL(url), LaunchArgv: shown, Log: logName}
		})
		r.progress(s.Name, "launch", "launching its router: %s", strings.Join(shown, " "))
		p, err := supervise.Start(ctx, supervise.Spec{
			Name: s.Name, Argv: argv, Env: rt.Env, Port: port,
			LogPath: filepath.Join(r.o.Dir, logName), StopGrace: s.StopGrace.D(), ShownArgv: shown,
			Keeper: r.o.RehearseExe, Secrets: serverSecrets(config.Server{Env: rt.Env, APIKeyEnv: s.APIKeyEnv}, argv, apiKey),
		})
		if err != nil {
			return "", fmt.Errorf("%s: router: %s", s.Name, strings.TrimPrefix(err.Error(), s.Name+": "))
		}
		f.group.Add("router", p)
		f.logs = append(f.logs, logName)
		f.router = p
		proc = p
		if r.o.Progress != nil {
			r.o.Progress(Event{Server: s.Name, Step: "launch", PID: p.PID(), Text: fmt.Sprintf("router running as pid %d, log %s", p.PID(), logName)})
		}
	}
	if err := supervise.WaitReady(ctx, proc, r.probe(s, f.baseURL, s.RouterReady(), apiKey, nil)); err != nil {
		var nr *supervise.NotReadyError
		if errors.As(err, &nr) {
			nr.Reason = "router: " + nr.Reason
			return logName, nr
		}
		return logName, fmt.Errorf("router: %w", err)
	}
	return "", nil
}

// replicaError prefixes a readiness error with the replica it is about.
func replicaError(j int, err error) error {
	var nr *supervise.NotReadyError
	if errors.As(err, &nr) {
		nr.Reason = fmt.Sprintf("replica %d: %s", j, nr.Reason)
		return nr
	}
	return fmt.Errorf("replica %d: %w", j, err)
}

// stop stops every process of f together (the router first), records how
// each ended in the bundle and reports it, and turns each log's warnings
// into notes.
func (r *runner) stop(i int, f *fleet) {
	defer f.removeScratch()
	if !f.launched() {
		return
	}
	s := r.cfg.Servers[i]
	var first []*supervise.Process
	if f.router != nil {
		first = append(first, f.router)
	}
	exits := f.group.Stop(first...)
	for k, e := range exits {
		r.setExit(i, f, k, e.String(), false)
		if l := f.label(k); l != "" {
			r.progress(s.Name, "stop", "%s: %s", l, e)
		} else {
			r.progress(s.Name, "stop", "%s", e)
		}
	}
	for k := range exits {
		r.logNotes(s.Name, f.group.Proc(k).LogPath())
	}
}

// setExit records how process k of f ended, keeping an earlier account
// unless overwrite.
func (r *runner) setExit(i int, f *fleet, k int, what string, overwrite bool) {
	set := func(dst *string) {
		if *dst == "" || overwrite {
			*dst = what
		}
	}
	r.setServer(i, func(b *bundle.Server) {
		switch p := f.group.Proc(k); {
		case p == f.router && b.Router != nil:
			set(&b.Router.Exit)
		case f.replicated && k < len(b.Replicas):
			set(&b.Replicas[k].Exit)
		default:
			set(&b.Exit)
		}
	})
}

// labelSeries is a series' label sets as the bundle keeps them.
func labelSeries(s promscrape.Series, origin time.Time) []bundle.LabelSeries {
	var out []bundle.LabelSeries
	for _, ls := range s.LabelSets {
		part := promscrape.Series{Samples: ls.Samples}
		out = append(out, bundle.LabelSeries{Labels: ls.Labels, Max: part.Max(), Series: part.Offsets(origin)})
	}
	return out
}

func maxText(v *float64) string {
	if v == nil {
		return "no sample"
	}
	return strconv.FormatFloat(*v, 'f', -1, 64)
}

// mechanismParts names each replica's and label set's maximum, for the
// progress line: "; replica 0 max 4, replica 1 max 4".
func mechanismParts(mc bundle.MechanismCheck) string {
	var parts []string
	for _, rs := range mc.Replicas {
		parts = append(parts, fmt.Sprintf("replica %d max %s", rs.Replica, maxText(rs.Max)))
		for _, ls := range rs.LabelSets {
			parts = append(parts, fmt.Sprintf("replica %d {%s} max %s", rs.Replica, ls.Labels, maxText(ls.Max)))
		}
	}
	for _, ls := range mc.LabelSets {
		parts = append(parts, fmt.Sprintf("{%s} max %s", ls.Labels, maxText(ls.Max)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, ", ")
}
