package rehearsal_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/supervise"
)

// processTree lists pid's descendants (from /proc), with their names.
func processTree(pid int) map[int]string {
	type proc struct {
		ppid int
		name string
	}
	procs := map[int]proc{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		open, close := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[close+1:]))
		ppid, _ := strconv.Atoi(f[1])
		procs[p] = proc{ppid, string(b[open+1 : close])}
	}
	out := map[int]string{}
	for changed := true; changed; {
		changed = false
		for p, pr := range procs {
			if _, seen := out[p]; !seen && (pr.ppid == pid || out[pr.ppid] != "") {
				out[p] = pr.name
				changed = true
			}
		}
	}
	return out
}

// running reports whether pid is a process that has not exited (a zombie
// waits for init to reap it and holds nothing).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// waveLine matches a progress line of an ended wave: the records it
// counts were journaled before the line was printed.
func waveLine(line string) (key string, n int, ok bool) {
	i := strings.Index(line, "recorded wave at ")
	if i < 0 {
		return "", 0, false
	}
	rest := line[i+len("recorded wave at "):]
	label, counts, found := strings.Cut(rest, ": ")
	if !found {
		return "", 0, false
	}
	var okCount int
	if _, err := fmt.Sscanf(counts, "%d/%d ok", &okCount, &n); err != nil {
		return "", 0, false
	}
	return label, n, true
}

func waveKey(w contract.Wave) string {
	c := "1 client"
	if w.Concurrency != 1 {
		c = fmt.Sprintf("%d clients", w.Concurrency)
	}
	return fmt.Sprintf("%s, repeat %d", c, w.Repeat)
}

// TestReliabilitySignals sends each signal that may end a rehearsal to a
// real `rehearse run` in the middle of a wave against a `rehearse sim`
// server, and checks what must hold after it: no record of a request that
// ended is lost (every record a progress line announced is in the bundle;
// after SIGKILL, in the bundle `rehearse report` rebuilds from the
// journal), the bundle verifies, no process rehearse started is left, and
// the catchable signals exit with 130. It logs one row per signal for
// RELIABILITY.md.
func TestReliabilitySignals(t *testing.T) {
	cases := []struct {
		name string
		sig  syscall.Signal
	}{
		{"SIGINT", syscall.SIGINT}, {"SIGTERM", syscall.SIGTERM}, {"SIGHUP", syscall.SIGHUP}, {"SIGKILL", syscall.SIGKILL},
	}
	var rows []string
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			row := reliabilityCase(t, c.sig)
			rows = append(rows, fmt.Sprintf("| %s | %s |", c.name, row))
		})
	}
	t.Logf("RELIABILITY.md rows (%d):\n| signal | exit | records journaled at the signal | records in the bundle | records announced | announced and in the bundle | records lost | processes left |\n%s", len(rows), strings.Join(rows, "\n"))
}

func reliabilityCase(t *testing.T, sig syscall.Signal) string {
	dir := t.TempDir()
	file := filepath.Join(dir, "r.yaml")
	// The serial server runs under a shell that stays its parent, as a
	// launcher script would: the shell leads the group, the simulator is
	// its child.
	yaml := model + `servers:
  - name: serial
    launch: [sh, -c, '"$0" "$@" & wait', "{rehearse}", sim, --engine, serial, --port, "{port}", --time-scale, "10", --seed, "1", --model, "{model}"]
    ready: {timeout: 20s}
    stop_grace: 3s
` + simServer("batching", "batching") +
		"workload: {concurrencies: [1, 8], repeats: 1, max_tokens: 64, timeout: 20s, extra_body: {ignore_eos: true}}\n"
	cmd, stderr, out := startRun(t, dir, file, yaml)
	started := map[int]string{}
	t.Cleanup(func() {
		cmd.Process.Kill()
		for pid := range started {
			if running(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var all []string
	announced := map[string]int{}
	var servers []int
	journaled := -1
	read := func(line string) {
		all = append(all, line)
		if key, n, ok := waveLine(line); ok {
			announced[key] += n
		}
		if i := strings.Index(line, "running as pid "); i >= 0 {
			var pid int
			fmt.Sscanf(line[i:], "running as pid %d", &pid)
			servers = append(servers, pid)
		}
	}
	// The signal goes once the 8-client wave is under way: the first of
	// its streams has ended on the server (its log says so), seven are
	// still to come. A hang guard only; no timing is assumed.
	streamsEnded := func() int {
		return strings.Count(readFileIfAny(filepath.Join(out, "serial.log")), " stream prompt_tokens=")
	}
	guard := time.After(2 * time.Minute)
	for sent := false; !sent; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("rehearse ended before the signal:\n%s", strings.Join(all, "\n"))
			}
			read(line)
		case <-time.After(10 * time.Millisecond):
		case <-guard:
			t.Fatalf("the 8-client wave never got under way:\n%s", strings.Join(all, "\n"))
		}
		if streamsEnded() >= 2 {
			// What the journal holds now must all be in the bundle after.
			if j, err := bundle.ReadJournal(filepath.Join(out, bundle.JournalFile)); err == nil {
				journaled = len(j.Records)
			}
			for pid, name := range processTree(cmd.Process.Pid) {
				started[pid] = name
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			sent = true
		}
	}
	for line := range lines {
		read(line)
	}
	cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	exit := strconv.Itoa(code)
	if sig == syscall.SIGKILL {
		exit = "killed"
		if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || st.Signal() != syscall.SIGKILL {
			t.Errorf("rehearse ended %v, not by SIGKILL", cmd.ProcessState)
		}
		// Nothing wrote results.json: the journal is the bundle.
		rebuild := exec.Command(rehearseExe, "report", out)
		if b, err := rebuild.CombinedOutput(); err != nil || !strings.Contains(string(b), "rebuilt from journal.jsonl") {
			t.Fatalf("rehearse report: %v\n%s", err, b)
		}
	} else if code != 130 {
		t.Errorf("exit status %d, want 130; stderr:\n%s", code, strings.Join(all, "\n"))
	}
	for _, p := range bundletest.Verify(out) {
		t.Errorf("verify: %s", p)
	}
	res, err := bundle.ReadResults(out)
	if err != nil {
		t.Fatal(err)
	}

	// Records lost: announced by a progress line, absent from the bundle.
	inBundle := map[string]int{}
	waveOf := map[int]contract.Wave{}
	for _, w := range res.Waves {
		waveOf[w.ID] = w
	}
	for _, r := range res.Records {
		if r.Kind == contract.KindRecorded {
			inBundle[waveKey(waveOf[r.Wave])]++
		}
	}
	total, kept, lost := 0, 0, 0
	for key, n := range announced {
		total += n
		kept += min(n, inBundle[key])
		lost += max(0, n-inBundle[key])
	}
	if lost > 0 || total == 0 {
		t.Errorf("%d of %d announced records are not in the bundle (announced %v, in the bundle %v)", lost, total, announced, inBundle)
	}
	if journaled < 1 || len(res.Records) < journaled {
		t.Errorf("%d records were in the journal when the signal went, %d in the bundle after", journaled, len(res.Records))
	}
	if sig != syscall.SIGKILL {
		// The cut wave ended too, every request of it recorded (those in
		// flight as canceled), and the server was stopped deliberately.
		var cut *contract.Wave
		for _, w := range res.Waves {
			if w.Concurrency == 8 {
				cut = &w
			}
		}
		if cut == nil || !strings.HasPrefix(cut.Stopped, "canceled") || inBundle[waveKey(*cut)] != 8 {
			t.Errorf("the interrupted wave: %+v with %d records", cut, inBundle["8 clients, repeat 1"])
		}
		for _, r := range res.Records {
			if !r.OK && r.ErrorKind != contract.ErrCanceled {
				t.Errorf("a request ended as %s (%s), not canceled", r.ErrorKind, r.Error)
			}
		}
		if !strings.Contains(readFile(t, filepath.Join(out, "serial.log")), supervise.StopMarker) {
			t.Error("serial.log has no stop marker")
		}
		if !strings.Contains(strings.Join(all, "\n"), "interrupted; the bundle in "+out+" holds what finished") {
			t.Errorf("stderr does not say where the bundle is:\n%s", strings.Join(all, "\n"))
		}
	}
	if len(servers) != 1 {
		t.Errorf("launched %d servers before the signal, want 1: %v", len(servers), servers)
	}

	// Nothing rehearse started is left; after SIGKILL the keeper acts on
	// its own (a hang guard only).
	var left []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		seen := map[int]bool{}
		left = nil
		for pid, name := range started {
			if running(pid) {
				seen[pid] = true
				left = append(left, fmt.Sprintf("%s (%d)", name, pid))
			}
		}
		for _, pid := range servers {
			for _, p := range liveInGroup(pid) {
				var gp int
				fmt.Sscanf(p, "%d", &gp)
				if !seen[gp] {
					left = append(left, p)
				}
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	return fmt.Sprintf("%s | %d | %d | %d | %d | %d | %d", exit, journaled, len(res.Records), total, kept, lost, len(left))
}
