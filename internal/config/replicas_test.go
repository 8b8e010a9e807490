package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func parseServer(t *testing.T, server string) (*Rehearsal, error) {
	t.Helper()
	return Parse([]byte("model: {id: m}\nservers:\n"+server), "r.yaml", "/cfg")
}

func TestReplicasDefaultsAndPlaceholders(t *testing.T) {
	r, err := parseServer(t, `  - name: pair
    launch: [srv, --port, "{port}", --index, "{replica}", --gpus, "{gpus}"]
    gpus: [[0], [2, 3]]
`)
	if err != nil {
		t.Fatal(err)
	}
	s := r.Servers[0]
	if s.ReplicaCount() != 2 || s.Balance != BalanceRoundRobin || !s.Balanced() || s.GPUCount() != 3 {
		t.Fatalf("defaults: replicas %d, balance %q, gpus %d", s.ReplicaCount(), s.Balance, s.GPUCount())
	}
	if got := r.ReplicaArgv(s, 1, 9001, "rh"); !slices.Equal(got, []string{"srv", "--port", "9001", "--index", "1", "--gpus", "2,3"}) {
		t.Errorf("replica 1 argv: %q", got)
	}
	// A server of one process keeps its argv, {replica} 0.
	one, err := parseServer(t, `  - name: tp2
    launch: [vllm, serve, m, --tensor-parallel-size, "2", --port, "{port}"]
    gpus: [[0, 1]]
`)
	if err != nil {
		t.Fatal(err)
	}
	if s := one.Servers[0]; s.ReplicaCount() != 1 || s.Balanced() || s.Balance != "" || s.GPUCount() != 2 {
		t.Errorf("tp2: %+v", s)
	}
	routed, err := parseServer(t, `  - name: fronted
    launch: [srv, --port, "{port}"]
    replicas: 3
    router: {launch: [router, --port, "{port}", --backends, "{replica_urls}"]}
`)
	if err != nil {
		t.Fatal(err)
	}
	s = routed.Servers[0]
	if s.Balanced() || s.Balance != "" {
		t.Errorf("a routed server is balanced by the client: %+v", s)
	}
	if got := routed.RouterArgv(s, 7000, []string{"http://a:1", "http://b:2"}, "rh"); !slices.Equal(got, []string{"router", "--port", "7000", "--backends", "http://a:1,http://b:2"}) {
		t.Errorf("router argv: %q", got)
	}
}

func TestReplicasValidation(t *testing.T) {
	for _, c := range []struct{ server, want string }{
		{`  - {name: a, launch: [s, "{port}"], replicas: 2, gpus: [[0]]}`, `servers[0].gpus: 1 GPU sets for 2 replicas`},
		{`  - {name: a, launch: [s, "{port}"], gpus: [[0], [0]]}`, `servers[0].gpus[1][0]: GPU 0 is already replica 0's`},
		{`  - {name: a, launch: [s, "{port}"], gpus: [[1, 1]]}`, `servers[0].gpus[0][1]: GPU 1 is listed twice`},
		{`  - {name: a, launch: [s, "{port}"], gpus: [[-1]]}`, `servers[0].gpus[0][0]: -1: a GPU index is 0 or more`},
		{`  - {name: a, launch: [s, "{port}"], gpus: [[]]}`, `servers[0].gpus[0]: empty`},
		{`  - {name: a, launch: [s, "{port}"], gpus: [["x"]]}`, `servers[0].gpus[0][0]: want a whole number`},
		{`  - {name: a, launch: [s, "{port}"], replicas: -1}`, `servers[0].replicas: -1: want 1 or more`},
		{`  - {name: a, base_url: "http://h:1", replicas: 2}`, `servers[0].replicas: 2, but the server is not launched`},
		{`  - {name: a, launch: [s], port: 8000, replicas: 2}`, `servers[0].port: 8000, but the server has 2 replicas`},
		{`  - {name: a, launch: [s, "{port}"], replicas: 2, balance: random}`, `servers[0].balance: "random": want round-robin or least-outstanding`},
		{`  - {name: a, launch: [s, "{port}"], balance: round-robin}`, `servers[0].balance: given, but the server has one replica`},
		{`  - {name: a, launch: [s, "{port}"], replicas: 2, balance: round-robin, router: {base_url: "http://r:1"}}`, `servers[0].balance: given with a router`},
		{`  - {name: a, launch: [s, "{port}"], replicas: 2, router: {}}`, `servers[0].router: needs base_url`},
		{`  - {name: a, launch: [s, "{port}"], replicas: 2, router: {launch: [r]}}`, `servers[0].router.launch: no {port} placeholder`},
		{`  - {name: a, launch: [s, "{port}"], gpus: [[0]], env: {CUDA_VISIBLE_DEVICES: "1"}}`, `servers[0].env.CUDA_VISIBLE_DEVICES: set, and gpus sets it too`},
		{`  - {name: a, launch: [s, "{port}"], replicas: 2, routr: {}}`, `servers[0].routr: unknown key`},
		{`  - {name: a, launch: [s, "{port}"], base_urls: ["http://h:1", "http://h:2"]}`, `servers[0].base_urls: given for a launched server`},
		{`  - {name: a, base_url: "http://h:0", base_urls: ["http://h:1", "http://h:2"]}`, `servers[0].base_url: given with base_urls`},
		{`  - {name: a, base_urls: ["http://h:1", "http://h:2"], replicas: 3}`, `servers[0].replicas: 3, but base_urls has 2 addresses`},
		{`  - {name: a, base_urls: ["http://h:1", "ftp://h:2"]}`, `servers[0].base_urls[1]: "ftp://h:2" is not an http(s) URL`},
		{`  - {name: a, base_urls: ["http://h:1", "http://h:1/"]}`, `servers[0].base_urls[1]: "http://h:1" is given twice`},
		{"  - {name: a, launch: [s, \"{port}\"], replicas: 2}\n  - {name: a.replica-1, launch: [s, \"{port}\"]}", `servers[1].name: "a.replica-1": its log a.replica-1.log would be one of server a's`},
	} {
		_, err := parseServer(t, c.server+"\n")
		var p *Problems
		if !errors.As(err, &p) {
			t.Errorf("%s: error %v, want problems", c.server, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %s", c.server, err, c.want)
		}
		if !strings.HasPrefix(err.Error(), "r.yaml: ") {
			t.Errorf("%s: error does not name the file: %v", c.server, err)
		}
	}
}

// TestSessionsWithClientBalancing: sessions over replicas the client
// balances are accepted (each session keeps to one replica).
func TestSessionsWithClientBalancing(t *testing.T) {
	r, err := Parse([]byte(`model: {id: m}
servers:
  - {name: a, launch: [s, "{port}"], replicas: 2, balance: least-outstanding}
workload:
  prompts: {source: synthetic, input_len: {fixed: 8}, output_len: {fixed: 4}, count: 4}
  sessions: {turns: 2}
`), "r.yaml", "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Servers[0]; !s.Balanced() || s.Balance != BalanceLeastOutstanding {
		t.Errorf("server %+v: want client-balanced, least-outstanding", s)
	}
}

// TestBaseURLsAreReplicasAlreadyRunning: base_urls makes a server of that
// many replicas already running, balanced by the client, its GPUs only
// stated.
func TestBaseURLsAreReplicasAlreadyRunning(t *testing.T) {
	r, err := parseServer(t, `  - name: pair
    base_urls: ["http://10.0.0.1:8000/", "http://10.0.0.2:8000"]
    balance: least-outstanding
    gpus: [[0], [1]]
`)
	if err != nil {
		t.Fatal(err)
	}
	s := r.Servers[0]
	if s.ReplicaCount() != 2 || !s.Balanced() || s.Balance != BalanceLeastOutstanding || s.GPUCount() != 2 ||
		s.BaseURL != "http://10.0.0.1:8000" || !slices.Equal(s.BaseURLs, []string{"http://10.0.0.1:8000", "http://10.0.0.2:8000"}) {
		t.Errorf("server %+v", s)
	}
}
