package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/rehearse/rehearse/internal/benchcmd"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/k8s"
)

type k8sOptions struct {
	spec       k8s.Spec
	out        string
	storage    string
	cpu        string
	memory     string
	startDelay time.Duration
}

// k8sOwned are the worker flags rehearse k8s sets itself.
var k8sOwned = []string{"output", "segment", "coordinator", "start-at", "workers"}

func newK8sCmd(st *State) *cobra.Command {
	var o k8sOptions
	cmd := &cobra.Command{
		Use:   "k8s --workers N --image IMAGE [flags] (run -f FILE | bench --base-url URL) [flags]",
		Short: "Write the Kubernetes manifests that run a rehearsal as N segment workers and merge them",
		Long: `Write, as multi-document YAML (stdout, or -o FILE), what runs one rehearsal
at scale on a cluster against an engine that is already running there:

  NAME-rehearsal  ConfigMap with the rehearsal file (run -f FILE only)
  NAME-results    ReadWriteMany claim for the bundles (unless --pvc names one)
  NAME-coordinator  Service of the coordinator the workers measure their
                  clock offset against
  NAME-collect    Job: "rehearse coordinate --workers N", which ends once
                  the N workers are done, then "rehearse merge" of
                  /results/worker-0 ... worker-(N-1) into /results/merged,
                  then "rehearse verify /results/merged"
  NAME-workers    Indexed Job (completions = parallelism = N): worker i runs
                  the command after the flags with -o /results/worker-i,
                  --segment auto/N (the index from the Job's completion
                  index, as REHEARSE_SEGMENT_INDEX) and --coordinator
                  http://NAME-coordinator[.NAMESPACE.svc]:PORT

Everything after "run" or "bench" is the worker's command line, as given to
rehearse run or rehearse bench, less -o (and the segment flags, which
rehearse k8s sets). The rehearsal file is loaded and checked here; its
servers must be reached at base_url (a launched server would be launched by
every worker). An API key is never written: each api_key_env (or bench's
--api-key-env) is read in the workers from the Secret --api-key-secret
(default NAME-api-keys), under a key of the variable's name. The
coordinator and the workers share a token, read from the Secret
--coordinator-token-secret (default NAME-coordinator-token, key
REHEARSE_COORDINATOR_TOKEN), which you create before applying:
  kubectl create secret generic NAME-coordinator-token \
      --from-literal=REHEARSE_COORDINATOR_TOKEN=$(openssl rand -hex 32)
Files the
rehearsal reads (a prompts file, a dataset, a tokenizer) must be in the
image or a volume: a warning names each. The image must have rehearse on
its PATH.`,
		Example: `  rehearse k8s --workers 4 --image ghcr.io/me/rehearse:v1 -o job.yaml run -f examples/sustained.yaml
  rehearse k8s --workers 8 --image rehearse:dev --namespace bench --pvc results --start-delay 2m \
      bench --base-url http://vllm.serving.svc:8000 --request-rate 40 --num-prompts 4000
  kubectl apply -f job.yaml && kubectl wait --for=condition=complete --timeout=1h job/rehearse-collect`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("k8s: want the workers' command after the flags: run -f FILE, or bench --base-url URL")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runK8s(st, &o, cmd.Flags(), args)
		},
	}
	f := cmd.Flags()
	// Flags after the worker's command are the worker's.
	f.SetInterspersed(false)
	f.IntVar(&o.spec.Workers, "workers", 0, "N: worker pods, each running one segment of the plan (required)")
	f.StringVar(&o.spec.Image, "image", "", "container image with rehearse on its PATH (required)")
	f.StringVar(&o.spec.Name, "name", "rehearse", "prefix of every object's name (a DNS-1123 label)")
	f.StringVar(&o.spec.Namespace, "namespace", "", "namespace of every object (default: kubectl's)")
	f.IntVar(&o.spec.Port, "port", k8s.DefaultPort, "the coordinator's port")
	f.StringVar(&o.spec.PVC, "pvc", "", "existing ReadWriteMany claim for the bundles (default: a new claim NAME-results)")
	f.StringVar(&o.storage, "storage", k8s.DefaultStorage, "size of the new results claim")
	f.StringVar(&o.spec.StorageClass, "storage-class", "", "storage class of the new results claim (default: the cluster's)")
	f.StringVar(&o.spec.ServiceAccount, "service-account", "", "service account of every pod")
	f.StringVar(&o.cpu, "cpu", "", "CPU request of each worker, e.g. 2 or 500m")
	f.StringVar(&o.memory, "memory", "", "memory request of each worker, e.g. 4Gi")
	f.StringVar(&o.spec.APIKeySecret, "api-key-secret", "", "Secret holding the API keys, one key per variable name (default NAME-api-keys)")
	f.StringVar(&o.spec.TokenSecret, "coordinator-token-secret", "", "Secret holding the coordinator's shared token under the key REHEARSE_COORDINATOR_TOKEN (default NAME-coordinator-token)")
	f.StringVar(&o.spec.StartAt, "start-at", "", "RFC 3339 instant at which every worker releases its load")
	f.DurationVar(&o.startDelay, "start-delay", 0, "--start-at this long after the manifests are written (apply them before then)")
	f.StringVarP(&o.out, "output", "o", "", "write the manifests to this file (default, or -: stdout)")
	return cmd
}

func runK8s(st *State, o *k8sOptions, f *pflag.FlagSet, args []string) error {
	if !f.Changed("workers") {
		return usageError("k8s: --workers N is required")
	}
	if err := checkOutput("-o", o.out); err != nil {
		return err
	}
	if err := o.resources(f); err != nil {
		return err
	}
	if o.startDelay != 0 {
		if o.spec.StartAt != "" {
			return usageError("k8s: --start-at and --start-delay: give one")
		}
		if o.startDelay < 0 {
			return usageError("k8s: --start-delay %v: want a positive duration", o.startDelay)
		}
		o.spec.StartAt = time.Now().UTC().Add(o.startDelay).Truncate(time.Second).Format(time.RFC3339)
	}
	worker, err := k8sWorker(st, &o.spec, args)
	if err != nil {
		return err
	}
	o.spec.Args = worker
	if len(o.spec.APIKeyEnvs) > 0 && o.spec.APIKeySecret == "" {
		o.spec.APIKeySecret = o.spec.Name + "-api-keys"
	}
	if err := o.spec.Validate(); err != nil {
		return usageError("k8s: %v", err)
	}
	y, err := o.spec.YAML()
	if err != nil {
		return err
	}
	return writeOutput(st, "-o", o.out, y)
}

// resources reads the quantity flags.
func (o *k8sOptions) resources(f *pflag.FlagSet) error {
	quantity := func(flag, v string) (resource.Quantity, error) {
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Sign() <= 0 {
			return q, usageError("k8s: --%s %q: want a positive quantity such as 4Gi or 500m", flag, v)
		}
		return q, nil
	}
	if o.spec.PVC != "" && (f.Changed("storage") || f.Changed("storage-class")) {
		return usageError("k8s: --pvc names an existing claim: --storage and --storage-class are for a new one")
	}
	var err error
	if o.spec.Storage, err = quantity("storage", o.storage); err != nil {
		return err
	}
	for _, r := range []struct {
		flag, v string
		name    corev1.ResourceName
	}{{"cpu", o.cpu, corev1.ResourceCPU}, {"memory", o.memory, corev1.ResourceMemory}} {
		if r.v == "" {
			continue
		}
		q, err := quantity(r.flag, r.v)
		if err != nil {
			return err
		}
		if o.spec.Resources.Requests == nil {
			o.spec.Resources.Requests = corev1.ResourceList{}
		}
		o.spec.Resources.Requests[r.name] = q
	}
	return nil
}

// k8sWorker checks the worker's command line (run or bench, parsed with
// that command's own flags) and returns it as the workers run it, with
// the rehearsal file in the ConfigMap's mount. It fills the spec's file
// and API key variables.
func k8sWorker(st *State, spec *k8s.Spec, args []string) ([]string, error) {
	var cmd *cobra.Command
	switch args[0] {
	case "run":
		cmd = newRunCmd(st)
	case "bench":
		cmd = newBenchCmd(st)
	default:
		return nil, usageError("k8s: %q: want run or bench after the flags (see rehearse k8s --help)", args[0])
	}
	fs := cmd.Flags()
	parse := args
	if args[0] == "bench" {
		parse = benchcmd.Args(args) // vllm bench serve's multi-valued flags, as Main reads them
	}
	if err := fs.Parse(parse[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, usageError("k8s %s: see rehearse %s --help for the worker's flags", args[0], args[0])
		}
		return nil, usageError("k8s %s: %v", args[0], err)
	}
	if fs.NArg() > 0 {
		return nil, usageError("k8s %s: unexpected argument %q", args[0], fs.Arg(0))
	}
	for _, name := range k8sOwned {
		if fs.Lookup(name) != nil && fs.Changed(name) {
			return nil, usageError("k8s %s: --%s is set by rehearse k8s for each worker", args[0], name)
		}
	}
	if args[0] == "bench" {
		if err := k8sBench(st, spec, fs); err != nil {
			return nil, err
		}
		return args, nil
	}
	return k8sRun(st, spec, fs, args)
}

// k8sRun loads the rehearsal file, refuses what cannot run as N workers,
// and ships the file in the ConfigMap (k8s.Spec.ShipRehearsal).
func k8sRun(st *State, spec *k8s.Spec, fs *pflag.FlagSet, args []string) ([]string, error) {
	file, _ := fs.GetString("file")
	if file == "" {
		return nil, usageError("k8s run: -f REHEARSAL.yaml is required")
	}
	cfg, err := config.Load(file)
	if err != nil {
		return nil, &ExitError{Code: 2, Err: err}
	}
	if err := spec.CheckServers(file, cfg); err != nil {
		return nil, &ExitError{Code: 2, Err: err}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	warnings, err := spec.ShipRehearsal(file, data)
	for _, w := range warnings {
		k8sWarn(st, "%s", w)
	}
	if err != nil {
		return nil, &ExitError{Code: 2, Err: err}
	}
	return k8s.WithFlagValue(fs, args, "file", k8s.RehearsalDir+"/"+spec.File.Name), nil
}

// k8sBench checks bench's endpoint and notes its API key variable.
func k8sBench(st *State, spec *k8s.Spec, fs *pflag.FlagSet) error {
	if err := benchcmd.CheckRefused(fs); err != nil {
		return err
	}
	bases, _ := fs.GetStringSlice("base-url")
	if len(bases) == 0 && !fs.Changed("host") {
		return usageError("k8s bench: --base-url is required (the engine's address inside the cluster, e.g. http://vllm.NAMESPACE.svc:8000)")
	}
	for _, base := range bases {
		if err := k8s.NoPassword(base); err != nil {
			return usageError("k8s bench: --base-url %v", err)
		}
	}
	if env, _ := fs.GetString("api-key-env"); env != "" {
		spec.APIKeyEnvs = append(spec.APIKeyEnvs, env)
	}
	for _, name := range []string{"prompts", "dataset-path", "tokenizer"} {
		v, _ := fs.GetString(name)
		if v == "" || (name == "tokenizer" && !strings.HasSuffix(v, ".json")) {
			continue
		}
		k8sWarn(st, "bench --%s %s: the file must be at that path in the image or a volume", name, v)
	}
	return nil
}

func k8sWarn(st *State, format string, a ...any) {
	fmt.Fprintf(st.Stderr, "rehearse k8s: warning: "+format+"\n", a...)
}
