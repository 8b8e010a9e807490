package export

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

// With side probes beside a load, vLLM's result has benchmark()'s probe
// keys after rtfx, from the successful probes (median, p99 and max E2E in
// ms), and the summary block their "Probe Requests" section after the
// throughputs; the percentile section of E2EL does not take them for
// percentiles.
func TestVLLMProbeKeys(t *testing.T) {
	res := bundletestOneLoad()
	w := res.Waves[0]
	sw := contract.Wave{ID: 1000, Server: w.Server, Repeat: w.Repeat, Kind: contract.KindSideProbe, Mode: contract.ModeOpen, RequestRateRPS: 1, StartedAt: w.StartedAt, Beside: w.ID}
	res.Waves = append(res.Waves, sw)
	for k, e2e := range []float64{0.010, 0.030, 0.020, -1} {
		r := contract.Record{Kind: sw.Kind, Server: sw.Server, Repeat: sw.Repeat, Wave: sw.ID, Client: k, Prompt: -1, StartS: float64(k), EndS: float64(k) + e2e, OK: true, MaxTokens: 1}
		if e2e < 0 {
			r.EndS, r.OK, r.ErrorKind = float64(k)+5, false, contract.ErrTimeout
		}
		res.Records = append(res.Records, r)
	}
	res.Recompute()
	obj := VLLMResults(res, Options{Metrics: []string{"e2el"}, Percentiles: []float64{99}})[0].Object
	var keys []string
	for _, f := range obj {
		keys = append(keys, f.k)
	}
	joined := strings.Join(keys, ",")
	if !strings.Contains(joined, ",rtfx,probe_completed,probe_failed,probe_median_e2el_ms,probe_p99_e2el_ms,probe_max_e2el_ms,mean_e2el_ms,") {
		t.Errorf("keys %s", joined)
	}
	for k, want := range map[string]any{"probe_completed": 3, "probe_failed": 1, "probe_median_e2el_ms": 20.0, "probe_max_e2el_ms": 30.0} {
		v, _ := obj.Get(k)
		if f, ok := v.(float64); ok && abs(f-want.(float64)) < 1e-9 {
			continue
		}
		if v != want {
			t.Errorf("%s %v, want %v", k, v, want)
		}
	}
	var b bytes.Buffer
	VLLMSummary(&b, obj)
	want := `------------------Probe Requests------------------
Probe requests completed:                3         
Probe requests failed:                   1         
Median probe E2EL (ms):                  20.00     
P99 probe E2EL (ms):                     29.80     
Max probe E2EL (ms):                     30.00     
----------------End-to-end Latency----------------
`
	if !strings.Contains(b.String(), want) || strings.Contains(b.String(), "Probe_") || strings.Count(b.String(), "E2EL (ms)") != 6 {
		t.Errorf("summary\n%s\nwant the probe block\n%s", b.String(), want)
	}

	// Without a successful probe vLLM writes no probe key.
	for i := range res.Records {
		if res.Records[i].Kind == contract.KindSideProbe {
			res.Records[i].OK, res.Records[i].ErrorKind = false, contract.ErrTimeout
		}
	}
	res.Recompute()
	if _, ok := VLLMResults(res, Options{})[0].Object.Get("probe_completed"); ok {
		t.Error("probe keys without a successful probe")
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
