package supervise

import "sync"

// Group is the processes of one server under test that live and end
// together: a server's replicas and its router (SPEC §10). Each process
// has its own keeper, log and grace period; Stop stops them all at once,
// so that N replicas take one grace period, not N.
type Group struct {
	procs []*Process
	// Labels name each process in notes ("replica 0", "router").
	labels []string
}

// Add puts a started process in the group under label.
func (g *Group) Add(label string, p *Process) {
	g.procs = append(g.procs, p)
	g.labels = append(g.labels, label)
}

// Len is the number of processes in the group.
func (g *Group) Len() int { return len(g.procs) }

// Proc is process i, in the order added.
func (g *Group) Proc(i int) *Process { return g.procs[i] }

// Label is process i's label.
func (g *Group) Label(i int) string { return g.labels[i] }

// Stop stops every process of the group together (SIGTERM to each group,
// SIGKILL after each one's grace period) and returns how each ended, in
// the order added. The processes in first are stopped, and gone, before
// the others are told: a router stops before its replicas.
func (g *Group) Stop(first ...*Process) []Exit {
	out := make([]Exit, len(g.procs))
	stop := func(pick func(*Process) bool) {
		var wg sync.WaitGroup
		for i, p := range g.procs {
			if !pick(p) {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i] = p.Stop()
			}()
		}
		wg.Wait()
	}
	isFirst := func(p *Process) bool {
		for _, f := range first {
			if f == p {
				return true
			}
		}
		return false
	}
	stop(isFirst)
	stop(func(p *Process) bool { return !isFirst(p) })
	return out
}

// Died returns the first process of the group that exited before rehearse
// stopped it, with how it ended.
func (g *Group) Died() (int, Exit, bool) {
	for i, p := range g.procs {
		if e, exited := p.Exited(); exited && !e.Deliberate {
			return i, e, true
		}
	}
	return -1, Exit{}, false
}
