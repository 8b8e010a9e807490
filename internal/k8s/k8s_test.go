package k8s

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/rehearse/rehearse/internal/golden"
)

// Decoded are the documents of a manifest stream, each decoded strictly
// into its official type.
type Decoded struct {
	ConfigMaps []corev1.ConfigMap
	Claims     []corev1.PersistentVolumeClaim
	Services   []corev1.Service
	Jobs       map[string]batchv1.Job
	Kinds      []string
}

// Decode splits a multi-document stream and decodes every document with
// unknown or duplicate fields refused.
func Decode(t *testing.T, stream []byte) Decoded {
	t.Helper()
	d := Decoded{Jobs: map[string]batchv1.Job{}}
	docs := bytes.Split(stream, []byte("\n---\n"))
	if !bytes.HasPrefix(docs[0], []byte("#")) {
		t.Fatalf("the stream does not open with its comment: %q", docs[0])
	}
	for i, doc := range docs[1:] {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		d.Kinds = append(d.Kinds, tm.APIVersion+"/"+tm.Kind)
		strict := func(into any) {
			t.Helper()
			if err := yaml.UnmarshalStrict(doc, into); err != nil {
				t.Fatalf("document %d (%s): not a strict %s: %v", i, tm.Kind, tm.Kind, err)
			}
		}
		switch tm.APIVersion + "/" + tm.Kind {
		case "v1/ConfigMap":
			var o corev1.ConfigMap
			strict(&o)
			d.ConfigMaps = append(d.ConfigMaps, o)
		case "v1/PersistentVolumeClaim":
			var o corev1.PersistentVolumeClaim
			strict(&o)
			d.Claims = append(d.Claims, o)
		case "v1/Service":
			var o corev1.Service
			strict(&o)
			d.Services = append(d.Services, o)
		case "batch/v1/Job":
			var o batchv1.Job
			strict(&o)
			d.Jobs[o.Name] = o
		default:
			t.Fatalf("document %d: unexpected %s %s", i, tm.APIVersion, tm.Kind)
		}
	}
	return d
}

func spec() Spec {
	return Spec{
		Name: "qwen", Namespace: "bench", Image: "ghcr.io/example/rehearse:v1", Workers: 3, Port: 7171,
		Args:         []string{"run", "-f", RehearsalDir + "/r.yaml", "--slo", "ttft<=500ms"},
		File:         &File{Name: "r.yaml", Content: "servers:\n  - name: vllm\n    base_url: http://vllm:8000\n    api_key_env: VLLM_API_KEY\n"},
		StartAt:      "2026-12-01T20:00:00Z",
		APIKeySecret: "qwen-api-keys", APIKeyEnvs: []string{"VLLM_API_KEY"},
	}
}

func manifest(t *testing.T, s Spec) []byte {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	y, err := s.YAML()
	if err != nil {
		t.Fatal(err)
	}
	return y
}

func TestSegmentWiring(t *testing.T) {
	s := spec()
	d := Decode(t, manifest(t, s))
	wantKinds := []string{"v1/ConfigMap", "v1/PersistentVolumeClaim", "v1/Service", "batch/v1/Job", "batch/v1/Job"}
	if !slices.Equal(d.Kinds, wantKinds) {
		t.Fatalf("kinds %v, want %v", d.Kinds, wantKinds)
	}

	w, ok := d.Jobs["qwen-workers"]
	if !ok {
		t.Fatalf("no Job qwen-workers among %v", d.Jobs)
	}
	if w.Spec.CompletionMode == nil || *w.Spec.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("completionMode %v, want Indexed", w.Spec.CompletionMode)
	}
	if w.Spec.Completions == nil || w.Spec.Parallelism == nil || *w.Spec.Completions != 3 || *w.Spec.Parallelism != 3 {
		t.Errorf("completions %v, parallelism %v: want 3 and 3", w.Spec.Completions, w.Spec.Parallelism)
	}
	if w.Namespace != "bench" {
		t.Errorf("workers' namespace %q", w.Namespace)
	}
	pod := w.Spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever || len(pod.Containers) != 1 {
		t.Fatalf("worker pod: restartPolicy %q, %d containers", pod.RestartPolicy, len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != s.Image || !slices.Equal(c.Command, []string{"rehearse"}) {
		t.Errorf("worker image %q command %v", c.Image, c.Command)
	}
	index := env(t, c, IndexEnv)
	if index.ValueFrom == nil || index.ValueFrom.FieldRef == nil ||
		index.ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
		t.Errorf("%s is not the completion index annotation: %+v", IndexEnv, index)
	}
	if !slices.Equal(c.Args[:5], s.Args) {
		t.Errorf("worker args %v do not start with the spec's %v", c.Args, s.Args)
	}
	if got := flagValue(t, c.Args, "--segment"); got != "auto/3" {
		t.Errorf("--segment %q, want auto/3", got)
	}
	if got := flagValue(t, c.Args, "-o"); got != "/results/worker-$(REHEARSE_SEGMENT_INDEX)" {
		t.Errorf("-o %q: not the worker's folder by its index", got)
	}
	if got := flagValue(t, c.Args, "--start-at"); got != s.StartAt {
		t.Errorf("--start-at %q, want %q", got, s.StartAt)
	}

	// The coordinator URL names the Service and its port.
	if len(d.Services) != 1 {
		t.Fatalf("%d Services", len(d.Services))
	}
	svc := d.Services[0]
	url := flagValue(t, c.Args, "--coordinator")
	if want := fmt.Sprintf("http://%s.%s.svc:%d", svc.Name, svc.Namespace, svc.Spec.Ports[0].Port); url != want {
		t.Errorf("--coordinator %q, want the Service's DNS name and port %q", url, want)
	}

	// The Service reaches the coordinator container's port.
	collect, ok := d.Jobs["qwen-collect"]
	if !ok {
		t.Fatal("no Job qwen-collect")
	}
	cp := collect.Spec.Template.Spec
	if len(cp.InitContainers) != 2 || len(cp.Containers) != 1 {
		t.Fatalf("collect pod: %d init containers and %d containers, want coordinate, merge, then verify", len(cp.InitContainers), len(cp.Containers))
	}
	for k, v := range svc.Spec.Selector {
		if collect.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not select the coordinator's pod (%v)", k, v, collect.Spec.Template.Labels)
		}
	}
	if w.Spec.Template.Labels["app.kubernetes.io/component"] == svc.Spec.Selector["app.kubernetes.io/component"] {
		t.Error("the Service would select the workers too")
	}
	if !svc.Spec.PublishNotReadyAddresses {
		t.Error("the coordinator serves from an init container: its address must be published before the pod is ready")
	}
	coord := cp.InitContainers[0]
	if !slices.Equal(coord.Args, []string{"coordinate", "--workers", "3", "--listen", "0.0.0.0:7171"}) {
		t.Errorf("coordinator args %v", coord.Args)
	}
	if len(coord.Ports) != 1 || coord.Ports[0].ContainerPort != svc.Spec.Ports[0].Port {
		t.Errorf("coordinator ports %+v do not match the Service's %+v", coord.Ports, svc.Spec.Ports)
	}
	if got, err := findPort(&cp, &svc.Spec.Ports[0]); err != nil || got != int(coord.Ports[0].ContainerPort) {
		t.Errorf("the Service's targetPort %s resolves to %d (%v) in the collect pod, want the coordinator's %d", svc.Spec.Ports[0].TargetPort.String(), got, err, coord.Ports[0].ContainerPort)
	}

	// merge lists each worker's folder once, then verify checks the merged one.
	merge := cp.InitContainers[1].Args
	wantMerge := []string{"merge", "/results/worker-0", "/results/worker-1", "/results/worker-2", "-o", "/results/merged"}
	if !slices.Equal(merge, wantMerge) {
		t.Errorf("merge args %v, want %v", merge, wantMerge)
	}
	if !slices.Equal(cp.Containers[0].Args, []string{"verify", "/results/merged"}) {
		t.Errorf("verify args %v", cp.Containers[0].Args)
	}

	// Every pod mounts the same claim at /results, and the file at /rehearsal.
	claim := d.Claims[0].Name
	for name, j := range d.Jobs {
		p := j.Spec.Template.Spec
		if p.Volumes[0].PersistentVolumeClaim == nil || p.Volumes[0].PersistentVolumeClaim.ClaimName != claim {
			t.Errorf("%s: volume %+v is not the claim %s", name, p.Volumes[0], claim)
		}
		if p.Volumes[1].ConfigMap == nil || p.Volumes[1].ConfigMap.Name != d.ConfigMaps[0].Name {
			t.Errorf("%s: volume %+v is not the ConfigMap", name, p.Volumes[1])
		}
		for _, c := range append(slices.Clone(p.InitContainers), p.Containers...) {
			if c.VolumeMounts[0].MountPath != ResultsDir || c.VolumeMounts[1].MountPath != RehearsalDir {
				t.Errorf("%s/%s mounts %+v", name, c.Name, c.VolumeMounts)
			}
		}
		if *j.Spec.BackoffLimit != 0 {
			t.Errorf("%s: backoffLimit %d: a worker run again would release its share late", name, *j.Spec.BackoffLimit)
		}
	}
	if d.Claims[0].Spec.AccessModes[0] != corev1.ReadWriteMany {
		t.Errorf("claim access modes %v", d.Claims[0].Spec.AccessModes)
	}
	if got := d.ConfigMaps[0].Data["r.yaml"]; got != s.File.Content {
		t.Errorf("ConfigMap holds %q, want the file's content", got)
	}

	// The API key comes from the Secret by reference.
	key := env(t, c, "VLLM_API_KEY")
	if key.Value != "" || key.ValueFrom == nil || key.ValueFrom.SecretKeyRef == nil ||
		key.ValueFrom.SecretKeyRef.Name != "qwen-api-keys" || key.ValueFrom.SecretKeyRef.Key != "VLLM_API_KEY" {
		t.Errorf("VLLM_API_KEY is not a Secret reference: %+v", key)
	}
}

func TestUnqualifiedCoordinatorAndGivenClaim(t *testing.T) {
	s := spec()
	s.Namespace, s.Port, s.PVC, s.File = "", 0, "shared-results", nil
	s.Args = []string{"bench", "--base-url", "http://vllm:8000"}
	d := Decode(t, manifest(t, s))
	if len(d.Claims) != 0 || len(d.ConfigMaps) != 0 {
		t.Errorf("%d claims, %d ConfigMaps: want none (claim given, no file)", len(d.Claims), len(d.ConfigMaps))
	}
	w := d.Jobs["qwen-workers"].Spec.Template.Spec
	if got := flagValue(t, w.Containers[0].Args, "--coordinator"); got != "http://qwen-coordinator:7070" {
		t.Errorf("--coordinator %q: want the Service's short name in the same namespace, default port", got)
	}
	if w.Volumes[0].PersistentVolumeClaim.ClaimName != "shared-results" || len(w.Volumes) != 1 {
		t.Errorf("volumes %+v", w.Volumes)
	}
	if d.Services[0].Namespace != "" {
		t.Errorf("namespace %q", d.Services[0].Namespace)
	}
}

func TestOneWorker(t *testing.T) {
	s := spec()
	s.Workers = 1
	d := Decode(t, manifest(t, s))
	if got := d.Jobs["qwen-collect"].Spec.Template.Spec.InitContainers[1].Args; !slices.Equal(got, []string{"merge", "/results/worker-0", "-o", "/results/merged"}) {
		t.Errorf("merge of one worker: %v", got)
	}
	if got := *d.Jobs["qwen-workers"].Spec.Completions; got != 1 {
		t.Errorf("completions %d", got)
	}
}

// Kubernetes expands $(VAR) in args: the user's text stays literal.
func TestUserArgsNotExpanded(t *testing.T) {
	s := spec()
	s.Args = []string{"bench", "--base-url", "http://vllm:8000", "--extra-body", `{"stop":"$(HOME)"}`}
	d := Decode(t, manifest(t, s))
	args := d.Jobs["qwen-workers"].Spec.Template.Spec.Containers[0].Args
	if got := flagValue(t, args, "--extra-body"); got != `{"stop":"$$(HOME)"}` {
		t.Errorf("--extra-body %q: $( not escaped", got)
	}
}

func TestSecretValueNeverWritten(t *testing.T) {
	const secret = "sk-never-in-a-manifest"
	t.Setenv("VLLM_API_KEY", secret)
	y := manifest(t, spec())
	if bytes.Contains(y, []byte(secret)) {
		t.Fatal("the API key's value is in the manifests")
	}
	if !bytes.Contains(y, []byte("secretKeyRef")) {
		t.Fatal("no secretKeyRef")
	}
}

func TestGolden(t *testing.T) {
	s := spec()
	s.Workers = 2
	golden.Check(t, "two-workers.yaml", manifest(t, s))
}

func TestValidate(t *testing.T) {
	cases := []struct {
		edit func(*Spec)
		want string
	}{
		{func(s *Spec) { s.Workers = 0 }, "workers 0"},
		{func(s *Spec) { s.Image = "" }, "image: empty"},
		{func(s *Spec) { s.Args = nil }, "no worker command"},
		{func(s *Spec) { s.Name = "Qwen_1" }, `name "Qwen_1"`},
		{func(s *Spec) { s.Name = "1qwen" }, `the Service "1qwen-coordinator"`},
		{func(s *Spec) { s.Name = strings.Repeat("a", 60) }, "the Service"},
		{func(s *Spec) { s.Namespace = "a.b" }, `namespace "a.b"`},
		{func(s *Spec) { s.PVC = "Bad" }, `pvc "Bad"`},
		{func(s *Spec) { s.Port = 70000 }, "port 70000"},
		{func(s *Spec) { s.APIKeySecret = "" }, "api key secret: empty"},
		{func(s *Spec) { s.TokenSecret = "Bad_Secret" }, `coordinator token secret "Bad_Secret"`},
		{func(s *Spec) { s.File.Name = "my file.yaml" }, `rehearsal file name "my file.yaml"`},
		{func(s *Spec) { s.StartAt = "tomorrow" }, `start-at "tomorrow"`},
		{func(s *Spec) { s.File.Content = strings.Repeat("#", 1<<20) }, "over the 1000000 a ConfigMap holds"},
	}
	for _, c := range cases {
		s := spec()
		c.edit(&s)
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error with %q, got %v", c.want, err)
		}
	}
	if err := spec().Validate(); err != nil {
		t.Errorf("the valid spec: %v", err)
	}
}

func env(t *testing.T, c corev1.Container, name string) corev1.EnvVar {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("container %s has no env %s", c.Name, name)
	return corev1.EnvVar{}
}

// flagValue is the value after the only occurrence of flag in args.
func flagValue(t *testing.T, args []string, flag string) string {
	t.Helper()
	var at []int
	for i, a := range args {
		if a == flag {
			at = append(at, i)
		}
	}
	if len(at) != 1 || at[0]+1 >= len(args) {
		t.Fatalf("%s appears %d times in %v, want once with a value", flag, len(at), args)
	}
	return args[at[0]+1]
}

// The strict decoding above can fail: a misspelt field is refused.
func TestDecodeIsStrict(t *testing.T) {
	var j batchv1.Job
	if err := yaml.UnmarshalStrict([]byte("apiVersion: batch/v1\nkind: Job\nspec:\n  completionMod: Indexed\n"), &j); err == nil {
		t.Fatal("an unknown field was accepted")
	}
}

// A few of the API server's own rules that strict decoding does not check:
// names are labels, every mount names a volume of its pod, env and port
// names are valid.
func TestServerSideRules(t *testing.T) {
	s := spec()
	s.Name = strings.Repeat("a", 63-len("-coordinator"))
	d := Decode(t, manifest(t, s))
	for _, svc := range d.Services {
		for _, p := range svc.Spec.Ports {
			if errs := validation.IsValidPortName(p.Name); len(errs) > 0 {
				t.Errorf("Service port %q: %v", p.Name, errs)
			}
		}
	}
	for name, j := range d.Jobs {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			t.Errorf("Job %q: %v", name, errs)
		}
		for k, v := range j.Spec.Template.Labels {
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("%s: label %s=%q: %v", name, k, v, errs)
			}
		}
		p := j.Spec.Template.Spec
		volumes := map[string]bool{}
		for _, v := range p.Volumes {
			volumes[v.Name] = true
		}
		for _, c := range append(slices.Clone(p.InitContainers), p.Containers...) {
			if errs := validation.IsDNS1123Label(c.Name); len(errs) > 0 {
				t.Errorf("%s: container %q: %v", name, c.Name, errs)
			}
			for _, m := range c.VolumeMounts {
				if !volumes[m.Name] {
					t.Errorf("%s/%s mounts %q, which is no volume of the pod", name, c.Name, m.Name)
				}
			}
			for _, e := range c.Env {
				if errs := validation.IsEnvVarName(e.Name); len(errs) > 0 {
					t.Errorf("%s/%s: env %q: %v", name, c.Name, e.Name, errs)
				}
			}
			for _, p := range c.Ports {
				if errs := validation.IsValidPortName(p.Name); len(errs) > 0 {
					t.Errorf("%s/%s: port %q: %v", name, c.Name, p.Name, errs)
				}
			}
		}
	}
}
