package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/k8s"
	"github.com/spf13/pflag"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const k8sRehearsal = `model:
  id: Qwen/Qwen2.5-1.5B-Instruct
servers:
  - name: vllm
    base_url: http://vllm.serving.svc:8000
    api_key_env: REHEARSE_K8S_KEY
  - name: other
    base_url: http://other.serving.svc:8000
    api_key_env: REHEARSE_K8S_KEY
workload:
  concurrencies: [1, 4]
  repeats: 1
`

func writeK8sFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// k8sDocs decodes the stream strictly: the ConfigMap and the Jobs by name.
func k8sDocs(t *testing.T, stream string) (map[string]corev1.ConfigMap, map[string]batchv1.Job) {
	t.Helper()
	cms, jobs := map[string]corev1.ConfigMap{}, map[string]batchv1.Job{}
	for _, doc := range strings.Split(stream, "\n---\n")[1:] {
		switch {
		case strings.Contains(doc, "\nkind: ConfigMap\n"):
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict([]byte(doc), &cm); err != nil {
				t.Fatal(err)
			}
			cms[cm.Name] = cm
		case strings.Contains(doc, "\nkind: Job\n"):
			var j batchv1.Job
			if err := yaml.UnmarshalStrict([]byte(doc), &j); err != nil {
				t.Fatal(err)
			}
			jobs[j.Name] = j
		}
	}
	return cms, jobs
}

func TestK8sRunShipsTheFile(t *testing.T) {
	const secret = "sk-k8s-never-written"
	t.Setenv("REHEARSE_K8S_KEY", secret)
	file := writeK8sFile(t, k8sRehearsal)
	out := filepath.Join(t.TempDir(), "job.yaml")
	code, stdout, errs := runMain(context.Background(), "k8s", "--workers", "4", "--image", "rehearse:dev", "--name", "qwen",
		"--cpu", "2", "--memory", "4Gi", "-o", out,
		"run", "-qf", file, "--slo", "ttft<=500ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if stdout != "" || errs != "" {
		t.Errorf("with -o: stdout %q, stderr %q", stdout, errs)
	}
	y, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(y, []byte(secret)) {
		t.Fatal("the API key's value is in the manifests")
	}
	cms, jobs := k8sDocs(t, string(y))
	if got := cms["qwen-rehearsal"].Data["r.yaml"]; got != k8sRehearsal {
		t.Errorf("ConfigMap r.yaml = %q, want the file as written", got)
	}
	c := jobs["qwen-workers"].Spec.Template.Spec.Containers[0]
	want := []string{"run", "-qf", "/rehearsal/r.yaml", "--slo", "ttft<=500ms",
		"-o", "/results/worker-$(REHEARSE_SEGMENT_INDEX)", "--segment", "auto/4", "--coordinator", "http://qwen-coordinator:7070"}
	if !slices.Equal(c.Args, want) {
		t.Errorf("worker args\n %v\nwant\n %v", c.Args, want)
	}
	var keys []string
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			keys = append(keys, e.Name+"="+e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key)
		}
	}
	if !slices.Equal(keys, []string{"REHEARSE_COORDINATOR_TOKEN=qwen-coordinator-token/REHEARSE_COORDINATOR_TOKEN", "REHEARSE_K8S_KEY=qwen-api-keys/REHEARSE_K8S_KEY"}) {
		t.Errorf("secret references %v: want the coordinator's token, then the one variable both servers name, once", keys)
	}
	if got := c.Resources.Requests.Cpu().String() + " " + c.Resources.Requests.Memory().String(); got != "2 4Gi" {
		t.Errorf("worker requests %s", got)
	}
}

func TestK8sBench(t *testing.T) {
	before := time.Now().UTC().Truncate(time.Second)
	code, stdout, errs := runMain(context.Background(), "k8s", "--workers", "2", "--image", "img", "--namespace", "bench",
		"--pvc", "results", "--start-delay", "2m", "--api-key-secret", "keys",
		"bench", "--base-url", "http://vllm:8000", "--request-rate", "4", "--num-prompts", "100", "--api-key-env", "KEY",
		"--tokenizer", "/models/tokenizer.json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "warning: bench --tokenizer /models/tokenizer.json") {
		t.Errorf("no warning for the tokenizer file: %q", errs)
	}
	cms, jobs := k8sDocs(t, stdout)
	if len(cms) != 0 || strings.Contains(stdout, "PersistentVolumeClaim\n") {
		t.Errorf("bench with --pvc: want no ConfigMap and no new claim")
	}
	args := jobs["rehearse-workers"].Spec.Template.Spec.Containers[0].Args
	if !slices.Equal(args[:9], []string{"bench", "--base-url", "http://vllm:8000", "--request-rate", "4", "--num-prompts", "100", "--api-key-env", "KEY"}) {
		t.Errorf("worker args %v: not the bench flags as given", args)
	}
	if !slices.Contains(args, "http://rehearse-coordinator.bench.svc:7070") {
		t.Errorf("worker args %v: no coordinator in namespace bench", args)
	}
	i := slices.Index(args, "--start-at")
	if i < 0 {
		t.Fatalf("no --start-at in %v", args)
	}
	at, err := time.Parse(time.RFC3339, args[i+1])
	if err != nil || at.Before(before.Add(2*time.Minute)) {
		t.Errorf("--start-at %q: want an RFC 3339 instant at least 2m after %v (%v)", args[i+1], before, err)
	}
	if !strings.Contains(stdout, "name: keys\n") || !strings.Contains(stdout, "key: KEY\n") {
		t.Errorf("no secretKeyRef keys/KEY")
	}
}

func TestK8sRefusals(t *testing.T) {
	launched := writeK8sFile(t, "model: {id: m}\nservers:\n  - name: sim\n    launch: [\"{rehearse}\", sim, --port, \"{port}\"]\n")
	relative := writeK8sFile(t, k8sRehearsal+"  prompts: prompts.txt\n")
	if err := os.WriteFile(filepath.Join(filepath.Dir(relative), "prompts.txt"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := writeK8sFile(t, "servers: 3\n")
	good := writeK8sFile(t, k8sRehearsal)
	base := []string{"k8s", "--workers", "2", "--image", "img"}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"k8s", "--image", "img", "run", "-f", good}, "--workers N is required"},
		{[]string{"k8s", "--workers", "0", "--image", "img", "run", "-f", good}, "workers 0: want at least 1"},
		{[]string{"k8s", "--workers", "2", "run", "-f", good}, "image: empty"},
		{[]string{"k8s", "--workers", "2", "--image", "img", "--name", "Qwen", "run", "-f", good}, `name "Qwen"`},
		{base, "want the workers' command after the flags"},
		{append(base, "sim"), `"sim": want run or bench`},
		{append(base, "run"), "-f REHEARSAL.yaml is required"},
		{append(base, "run", "-f", launched), "servers[0] (sim): has launch"},
		{append(base, "run", "-f", relative), `workload.prompts "prompts.txt": a relative path`},
		{append(base, "run", "-f", good, "-o", "x"), "--output is set by rehearse k8s"},
		{append(base, "run", "-f", good, "extra"), `unexpected argument "extra"`},
		{append(base, "bench", "--request-rate", "4"), "--base-url is required"},
		{append(base, "bench", "--base-url", "http://u:pw@vllm:8000"), "carries a password"},
		{append(base, "bench", "--base-url", "http://vllm:8000", "--base-url", "http://u:pw@vllm-b:8000"), "carries a password"},
		{append(base, "bench", "--base-url", "http://vllm:8000", "--frob"), "unknown flag: --frob"},
		{append(base, "bench", "--base-url", "http://vllm:8000", "--profile"), "--profile (vllm bench serve's)"},
		{append(base[:3], "--start-at", "2026-12-01T20:00:00Z", "--start-delay", "1m", "--image", "img", "run", "-f", good), "give one"},
		{append(base[:3], "--pvc", "r", "--storage", "5Gi", "--image", "img", "run", "-f", good), "--pvc names an existing claim"},
		{append(base[:3], "--memory", "lots", "--image", "img", "run", "-f", good), `--memory "lots"`},
	}
	// A bad file: the loader's problems, each with its field path, as run lists them.
	if code, _, errs := runMain(context.Background(), append(base, "run", "-f", bad)...); code != 2 || !strings.Contains(errs, "servers: want a list, got 3") {
		t.Errorf("a bad file: exit %d, %q", code, errs)
	}
	for _, c := range cases {
		code, stdout, errs := runMain(context.Background(), c.args...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 || stdout != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %d bytes: want exit 2 and one line with %q", c.args[1:], code, errs, len(stdout), c.want)
		}
	}
}

func TestWithFlagValue(t *testing.T) {
	fs := newRunCmd(&State{}).Flags()
	cases := []struct{ in, want []string }{
		{[]string{"run", "-f", "a.yaml"}, []string{"run", "-f", "NEW"}},
		{[]string{"run", "--file", "a.yaml", "-q"}, []string{"run", "--file", "NEW", "-q"}},
		{[]string{"run", "--file=a.yaml"}, []string{"run", "--file=NEW"}},
		{[]string{"run", "-fa.yaml"}, []string{"run", "-fNEW"}},
		{[]string{"run", "-f=a.yaml"}, []string{"run", "-f=NEW"}},
		{[]string{"run", "-qf", "a.yaml"}, []string{"run", "-qf", "NEW"}},
		// A value that looks like the flag is a value.
		{[]string{"run", "--slo", "-f", "-f", "a.yaml"}, []string{"run", "--slo", "-f", "-f", "NEW"}},
		{[]string{"run", "--progress=never", "-f", "a.yaml"}, []string{"run", "--progress=never", "-f", "NEW"}},
	}
	for _, c := range cases {
		if got := k8s.WithFlagValue(fs, c.in, "file", "NEW"); !slices.Equal(got, c.want) {
			t.Errorf("%v: got %v, want %v", c.in, got, c.want)
		}
	}
	// The parsed value agrees with what was rewritten.
	for _, c := range cases {
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		fs.AddFlagSet(newRunCmd(&State{}).Flags())
		if err := fs.Parse(k8s.WithFlagValue(fs, c.in, "file", "NEW")[1:]); err != nil {
			t.Fatal(err)
		}
		if v, _ := fs.GetString("file"); v != "NEW" {
			t.Errorf("%v: parsed file %q after rewriting", c.in, v)
		}
	}
}
