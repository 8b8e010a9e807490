package config

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/rehearse/rehearse/internal/contract"
)

// A server of several processes (SPEC §10): `replicas: N` launches N
// processes of the same argv, each with its own free port ({port}), index
// ({replica}), GPU set (`gpus`, as CUDA_VISIBLE_DEVICES and {gpus}), log
// and readiness; they are stopped together. Requests reach them through a
// router the file names, or are balanced by the client per request.
// Engines with parallelism of their own (vLLM's --tensor-parallel-size or
// --data-parallel-size) are one process whose argv says so; `gpus` then
// says how many GPUs it uses ([[0, 1]]).

// Router is the address the requests of a replicated server go to: an
// endpoint already running (BaseURL), or one rehearse launches after the
// replicas and stops before them (Launch; {port} is its port and
// {replica_urls} the replicas' base URLs, comma-separated).
type Router struct {
	BaseURL string            `yaml:"base_url"`
	Launch  []string          `yaml:"launch"`
	Env     map[string]string `yaml:"env"`
	// Port is the port a launched router listens on; 0 picks a free one.
	Port int `yaml:"port"`
	// Ready is the router's readiness probe (default: the server's).
	Ready *Ready `yaml:"ready"`
}

// Balancing modes (Server.Balance).
const (
	BalanceRoundRobin       = "round-robin"
	BalanceLeastOutstanding = "least-outstanding"
)

// ReplicaCount is how many processes the server is (at least 1).
func (s Server) ReplicaCount() int { return max(s.Replicas, 1) }

// GPUList is replica i's GPU set as a comma list, "" without gpus.
func (s Server) GPUList(i int) string {
	if i < 0 || i >= len(s.GPUs) {
		return ""
	}
	parts := make([]string, len(s.GPUs[i]))
	for j, g := range s.GPUs[i] {
		parts[j] = strconv.Itoa(g)
	}
	return strings.Join(parts, ",")
}

// GPUCount is the number of distinct GPUs the server uses (0: not said).
func (s Server) GPUCount() int { return contract.DistinctGPUs(s.GPUs) }

// Balanced reports whether the client balances the server's requests over
// its replicas (several replicas, no router).
func (s Server) Balanced() bool { return s.ReplicaCount() > 1 && s.Router == nil }

// RouterArgv is the router's launch argv with placeholders substituted:
// {port} its port, {replica_urls} the replicas' base URLs.
func (r *Rehearsal) RouterArgv(s Server, port int, replicaURLs []string, rehearseExe string) []string {
	if s.Router == nil {
		return nil
	}
	return r.substitute(s.Router.Launch, placeholders{port: port, exe: rehearseExe, replicaURLs: strings.Join(replicaURLs, ",")})
}

func (s *Server) applyReplicaDefaults() {
	for j, u := range s.BaseURLs {
		s.BaseURLs[j] = strings.TrimRight(u, "/")
	}
	if len(s.BaseURLs) > 0 {
		if s.Replicas == 0 {
			s.Replicas = len(s.BaseURLs)
		}
		if s.BaseURL == "" {
			s.BaseURL = s.BaseURLs[0]
		}
	}
	if s.Replicas == 0 && len(s.GPUs) > 0 {
		s.Replicas = len(s.GPUs)
	}
	if s.Balance == "" && s.Balanced() {
		s.Balance = BalanceRoundRobin
	}
	if rt := s.Router; rt != nil {
		rt.BaseURL = strings.TrimRight(rt.BaseURL, "/")
	}
}

// validateReplicas checks replicas, gpus, router and balance of server s at
// field path at.
func validateReplicas(at string, s Server, p *Problems) {
	if s.Replicas < 0 {
		p.add(at+".replicas", "%d: want 1 or more", s.Replicas)
	}
	n := s.ReplicaCount()
	if len(s.GPUs) > 0 && len(s.GPUs) != n {
		p.add(at+".gpus", "%d GPU sets for %d replicas: give one set per replica", len(s.GPUs), n)
	}
	validateGPUSets(at, s.GPUs, p)
	if len(s.GPUs) > 0 {
		if _, set := s.Env["CUDA_VISIBLE_DEVICES"]; set {
			p.add(at+".env.CUDA_VISIBLE_DEVICES", "set, and gpus sets it too: give the GPUs in one place")
		}
	}
	if len(s.BaseURLs) > 0 {
		validateBaseURLs(at, s, p)
	}
	if n > 1 {
		switch {
		case !s.Launched() && len(s.BaseURLs) > 0:
		case !s.Launched():
			p.add(at+".replicas", "%d, but the server is not launched: replicas are processes rehearse starts (list endpoints already running in base_urls, or point base_url at their router)", n)
		case s.Port != 0:
			p.add(at+".port", "%d, but the server has %d replicas: each needs its own port (leave port out and put {port} in launch)", s.Port, n)
		case s.BaseURL != "":
			p.add(at+".base_url", "given, but the server has %d replicas, each at its own port: name a router for one address", n)
		}
	}
	switch s.Balance {
	case "", BalanceRoundRobin, BalanceLeastOutstanding:
	default:
		p.add(at+".balance", "%q: want %s or %s", s.Balance, BalanceRoundRobin, BalanceLeastOutstanding)
	}
	if s.Balance != "" && s.Router != nil {
		p.add(at+".balance", "given with a router: the router balances (drop one of them)")
	} else if s.Balance != "" && n == 1 {
		p.add(at+".balance", "given, but the server has one replica: nothing to balance")
	}
	if s.Router != nil {
		validateRouter(at, s, p)
	}
}

// validateGPUSets checks each replica's GPU set: not empty, indices of 0
// or more, and no GPU in two sets.
func validateGPUSets(at string, sets [][]int, p *Problems) {
	owner := map[int]int{}
	for i, set := range sets {
		if len(set) == 0 {
			p.add(fmt.Sprintf("%s.gpus[%d]", at, i), "empty: give the GPU indices replica %d uses", i)
		}
		for j, g := range set {
			if g < 0 {
				p.add(fmt.Sprintf("%s.gpus[%d][%d]", at, i, j), "%d: a GPU index is 0 or more", g)
				continue
			}
			if k, dup := owner[g]; dup && k != i {
				p.add(fmt.Sprintf("%s.gpus[%d][%d]", at, i, j), "GPU %d is already replica %d's: no GPU serves two replicas", g, k)
			} else if dup {
				p.add(fmt.Sprintf("%s.gpus[%d][%d]", at, i, j), "GPU %d is listed twice", g)
			}
			owner[g] = i
		}
	}
}

// validateBaseURLs checks the base_urls of endpoints already running, one
// per replica.
func validateBaseURLs(at string, s Server, p *Problems) {
	switch {
	case s.Launched():
		p.add(at+".base_urls", "given for a launched server: its replicas listen on the ports rehearse gives them (use replicas)")
	case s.BaseURL != s.BaseURLs[0]:
		p.add(at+".base_url", "given with base_urls: give the addresses in one place")
	case s.Replicas != len(s.BaseURLs):
		p.add(at+".replicas", "%d, but base_urls has %d addresses: one replica per address", s.Replicas, len(s.BaseURLs))
	case s.Router != nil:
		p.add(at+".router", "given with base_urls: point base_url at the router instead")
	}
	seen := map[string]bool{}
	for j, u := range s.BaseURLs {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			p.add(fmt.Sprintf("%s.base_urls[%d]", at, j), "%q is not an http(s) URL", u)
		} else if seen[u] {
			p.add(fmt.Sprintf("%s.base_urls[%d]", at, j), "%q is given twice: each replica has its own address", u)
		}
		seen[u] = true
	}
}

// validateRouter checks server s's router (at.router).
func validateRouter(at string, s Server, p *Problems) {
	rt := s.Router
	rat := at + ".router"
	if !s.Launched() {
		p.add(rat, "only meaningful for a launched server (point base_url at the router instead)")
	}
	if s.BaseURL != "" {
		p.add(at+".base_url", "given with a router: requests go to the router (give router.base_url)")
	}
	if rt.Launch != nil && len(rt.Launch) == 0 {
		p.add(rat+".launch", "empty")
	}
	if len(rt.Launch) > 0 && strings.TrimSpace(rt.Launch[0]) == "" {
		p.add(rat+".launch[0]", "empty program name")
	}
	if rt.BaseURL == "" && len(rt.Launch) == 0 {
		p.add(rat, "needs base_url (a router already running) or launch (an argv to start it)")
	}
	if rt.BaseURL != "" {
		u, err := url.Parse(rt.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add(rat+".base_url", "%q is not an http(s) URL", rt.BaseURL)
		}
	}
	if rt.Port < 0 || rt.Port > 65535 {
		p.add(rat+".port", "%d is not a port (0 picks a free one)", rt.Port)
	}
	if len(rt.Launch) == 0 && rt.Port != 0 {
		p.add(rat+".port", "only meaningful for a launched router (put the port in base_url)")
	}
	if len(rt.Launch) > 0 && rt.Port == 0 && !slices.ContainsFunc(rt.Launch, func(a string) bool { return strings.Contains(a, "{port}") }) {
		if rt.BaseURL != "" {
			p.add(rat+".port", "0, but base_url is given: a launched router with a base_url needs its port set")
		} else {
			p.add(rat+".launch", "no {port} placeholder and no port: rehearse cannot know where the router listens")
		}
	}
	for _, k := range sortedKeysOf(rt.Env) {
		if !envNameRE.MatchString(k) {
			p.add(rat+".env", "%q is not an environment variable name", k)
		}
	}
	if rt.Ready != nil {
		if rt.Ready.Path != "" && !strings.HasPrefix(rt.Ready.Path, "/") {
			p.add(rat+".ready.path", "%q must start with /", rt.Ready.Path)
		}
		switch rt.Ready.Mode {
		case "", ReadyFull, ReadyModels, ReadyAnswer:
		default:
			p.add(rat+".ready.mode", "%q: want full, models or answer", rt.Ready.Mode)
		}
	}
}

// checkLogNames refuses a server name that another server's replica or
// router log would take (<name>.replica-<i>.log, <name>.router.log).
func checkLogNames(servers []Server, p *Problems) {
	taken := map[string]string{}
	for _, s := range servers {
		if n := s.ReplicaCount(); n > 1 {
			for j := range n {
				taken[fmt.Sprintf("%s.replica-%d", s.Name, j)] = s.Name
			}
		}
		if s.Router != nil {
			taken[s.Name+".router"] = s.Name
		}
	}
	for i, s := range servers {
		if owner, ok := taken[s.Name]; ok {
			p.add(fmt.Sprintf("servers[%d].name", i), "%q: its log %s.log would be one of server %s's", s.Name, s.Name, owner)
		}
	}
}

func sortedKeysOf(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// RouterReady is the router's readiness probe: its own where given, the
// server's otherwise.
func (s Server) RouterReady() Ready {
	rd := s.Ready
	if s.Router != nil && s.Router.Ready != nil {
		if s.Router.Ready.Path != "" {
			rd.Path = s.Router.Ready.Path
		}
		if s.Router.Ready.Mode != "" {
			rd.Mode = s.Router.Ready.Mode
		}
		if s.Router.Ready.Timeout != 0 {
			rd.Timeout = s.Router.Ready.Timeout
		}
	}
	return rd
}
