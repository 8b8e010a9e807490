package provenance

import (
	"context"
	"runtime"
	"strings"
	"testing"
)

func TestCPUModel(t *testing.T) {
	x86 := "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)  CPU @ 2.20GHz\n\nprocessor\t: 1\nmodel name\t: other\n"
	if got := cpuModel([]byte(x86)); got != "Intel(R) Xeon(R) CPU @ 2.20GHz" {
		t.Errorf("x86: %q", got)
	}
	arm := "processor\t: 0\nBogoMIPS\t: 50.00\n\nHardware\t: BCM2835\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n"
	if got := cpuModel([]byte(arm)); got != "BCM2835" {
		t.Errorf("arm: %q", got)
	}
	if got := cpuModel(nil); got != "" {
		t.Errorf("empty: %q", got)
	}
}

func TestMemTotal(t *testing.T) {
	if got := memTotal([]byte("MemTotal:       16384 kB\nMemFree: 1 kB\n")); got != 16384*1024 {
		t.Errorf("got %d", got)
	}
	if got := memTotal([]byte("MemTotal: lots kB\n")); got != 0 {
		t.Errorf("garbage: %d", got)
	}
}

func TestParseQuery(t *testing.T) {
	gpus, err := parseQuery([]byte("NVIDIA H200, 143771, 570.86.15\nTesla T4, 15360, 580.82.07\n"))
	if err != nil || len(gpus) != 2 || gpus[0].Name != "NVIDIA H200" || gpus[0].MemoryMiB != 143771 || gpus[1].Driver != "580.82.07" {
		t.Fatalf("%+v %v", gpus, err)
	}
	if _, err := parseQuery([]byte("T4, [N/A], 1\n")); err == nil || !strings.Contains(err.Error(), "memory.total") {
		t.Errorf("bad memory: %v", err)
	}
	if _, err := parseQuery([]byte("only a name\n")); err == nil {
		t.Error("short line accepted")
	}
}

func TestCUDAVersion(t *testing.T) {
	banner := "| NVIDIA-SMI 580.82.07    Driver Version: 580.82.07      CUDA Version: 13.0     |\n"
	if got := cudaVersion([]byte(banner)); got != "13.0" {
		t.Errorf("got %q", got)
	}
	if got := cudaVersion([]byte("no banner")); got != "" {
		t.Errorf("got %q", got)
	}
}

func TestHostAndGPUsHere(t *testing.T) {
	h := Host()
	if h.CPUs != runtime.NumCPU() || h.OS != runtime.GOOS || h.Arch != runtime.GOARCH {
		t.Fatalf("%+v", h)
	}
	if runtime.GOOS == "linux" && (h.MemoryBytes == 0 || h.Kernel == "") {
		t.Fatalf("linux host without memory or kernel: %+v", h)
	}
	gpus, err := GPUs(context.Background())
	if err != nil {
		t.Logf("nvidia-smi present but failing: %v", err)
	}
	for _, g := range gpus {
		if g.Name == "" || g.MemoryMiB <= 0 {
			t.Fatalf("gpu %+v", g)
		}
	}
}
