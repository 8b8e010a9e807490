// Package provenance describes what a rehearsal ran with: the rehearse
// build (version, commit, Go version from its build info), and the machine:
// host name, OS, CPU model and count, memory and kernel from /proc, and each
// GPU's name, memory, driver and CUDA version from nvidia-smi where it is
// installed. What cannot be read is left empty, never guessed, and the
// tool record says so when its commit is unknown.
package provenance

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
)

// Host describes this machine.
func Host() bundle.Host {
	h := bundle.Host{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	h.Hostname, _ = os.Hostname()
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		h.CPU = cpuModel(data)
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		h.MemoryBytes = memTotal(data)
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(data))
	}
	return h
}

// cpuModel returns the first "model name" (x86) or "Model"/"Hardware"
// (ARM) of /proc/cpuinfo.
func cpuModel(cpuinfo []byte) string {
	var fallback string
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.Join(strings.Fields(v), " ")
		switch k {
		case "model name":
			return v
		case "Model", "Hardware":
			if fallback == "" {
				fallback = v
			}
		}
	}
	return fallback
}

// memTotal returns MemTotal of /proc/meminfo in bytes, 0 if absent.
func memTotal(meminfo []byte) uint64 {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// GPUs queries nvidia-smi. Without nvidia-smi it returns no GPUs and no
// error; a failing nvidia-smi is an error (the caller notes it).
func GPUs(ctx context.Context) ([]bundle.GPU, error) {
	bin, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			return nil, fmt.Errorf("nvidia-smi: %v: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, fmt.Errorf("nvidia-smi: %v", err)
	}
	gpus, err := parseQuery(out)
	if err != nil {
		return nil, err
	}
	if header, err := exec.CommandContext(ctx, bin).Output(); err == nil {
		cuda := cudaVersion(header)
		for i := range gpus {
			gpus[i].CUDA = cuda
		}
	}
	return gpus, nil
}

// parseQuery reads nvidia-smi's "name, memory.total, driver_version" CSV.
func parseQuery(out []byte) ([]bundle.GPU, error) {
	var gpus []bundle.GPU
	for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 3 {
			return nil, fmt.Errorf("nvidia-smi line %d %q: want name, memory.total, driver_version", i+1, line)
		}
		mem, err := strconv.Atoi(strings.TrimSpace(f[1]))
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi line %d: memory.total %q is not a number of MiB", i+1, strings.TrimSpace(f[1]))
		}
		gpus = append(gpus, bundle.GPU{Name: strings.TrimSpace(f[0]), MemoryMiB: mem, Driver: strings.TrimSpace(f[2])})
	}
	return gpus, nil
}

var cudaRE = regexp.MustCompile(`CUDA Version:\s*([0-9][0-9.]*)`)

// cudaVersion reads "CUDA Version: 12.8" from nvidia-smi's banner.
func cudaVersion(banner []byte) string {
	if m := cudaRE.FindSubmatch(banner); m != nil {
		return string(m[1])
	}
	return ""
}
