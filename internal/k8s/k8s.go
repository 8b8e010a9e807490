// Package k8s writes the Kubernetes manifests that run one rehearsal's
// segments at scale: an Indexed Job of N workers, each running its share
// of the plan (rehearse run or bench with --segment auto/N, the index from
// the Job's completion index), a coordinator that the workers measure
// their clock offset against (every request carrying a shared token read
// from a Secret the user creates), and the collection that merges the N
// segment bundles into one and verifies it. The objects are the official
// k8s.io/api types, written as multi-document YAML in a fixed order.
//
// It also checks what the workers run before anything is written: a
// rehearsal file's servers and the files it reads (CheckServers,
// ShipRehearsal), and the worker's command line (WithFlagValue points -f
// at the mounted file). The package only describes; it never talks to a
// cluster.
package k8s

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/rehearse/rehearse/internal/coordinate"
)

// Paths and names inside the pods.
const (
	// ResultsDir is where the results volume is mounted: worker i writes
	// its bundle to ResultsDir/worker-i, the merged bundle goes to
	// ResultsDir/merged.
	ResultsDir = "/results"
	// RehearsalDir is where the ConfigMap holding the rehearsal file is
	// mounted.
	RehearsalDir = "/rehearsal"
	// IndexEnv is the worker's segment index, as `--segment auto/N` reads
	// it.
	IndexEnv = "REHEARSE_SEGMENT_INDEX"
	// IndexAnnotation is the pod annotation an Indexed Job sets to the
	// completion index.
	IndexAnnotation = "batch.kubernetes.io/job-completion-index"
	// Binary is the command run in every container: the image must have
	// rehearse on its PATH.
	Binary = "rehearse"
	// DefaultPort is the coordinator's port.
	DefaultPort = 7070
	// DefaultStorage is the size of the results claim rehearse k8s creates
	// when it is given none.
	DefaultStorage = "1Gi"
)

// Spec is one rehearsal run as N workers on a cluster.
type Spec struct {
	// Name prefixes every object (NAME-coordinator, NAME-workers, ...).
	Name string
	// Namespace of every object; "" leaves it to kubectl's context.
	Namespace string
	Image     string
	// Workers is N: the Job's completions and parallelism, and the
	// segments of the plan.
	Workers int
	// Port is the coordinator's port (0: DefaultPort).
	Port int
	// Args are the worker's rehearse arguments without the segment flags
	// and without -o, e.g. ["run", "-f", "/rehearsal/x.yaml"] or
	// ["bench", "--base-url", "http://vllm:8000", ...].
	Args []string
	// File, when set, is the rehearsal file, shipped as a ConfigMap and
	// mounted at RehearsalDir/File.Name.
	File *File
	// StartAt is the RFC 3339 instant every worker releases its load at
	// ("": the workers' own default).
	StartAt string
	// PVC names an existing ReadWriteMany claim for the results; "" makes
	// a claim NAME-results of Storage (DefaultStorage) in StorageClass.
	PVC          string
	Storage      resource.Quantity
	StorageClass string
	// ServiceAccount runs every pod ("": the namespace's default).
	ServiceAccount string
	// Resources are the worker container's.
	Resources corev1.ResourceRequirements
	// APIKeySecret is the Secret that holds each variable of APIKeyEnvs
	// under a key of the same name; the manifests only reference it.
	APIKeySecret string
	APIKeyEnvs   []string
	// TokenSecret is the Secret that holds the coordinator's shared token
	// under the key coordinate.TokenEnv ("": NAME-coordinator-token); the
	// coordinator and every worker read it by reference, never by value.
	TokenSecret string
}

// File is a rehearsal file's name (a ConfigMap key) and content.
type File struct {
	Name    string
	Content string
}

// ServiceName is the coordinator's Service.
func (s Spec) ServiceName() string { return s.Name + "-coordinator" }

// WorkersName is the workers' Job.
func (s Spec) WorkersName() string { return s.Name + "-workers" }

// CollectName is the coordinator's Job, which collects the workers' bundles.
func (s Spec) CollectName() string { return s.Name + "-collect" }

// ConfigMapName is the ConfigMap holding the rehearsal file.
func (s Spec) ConfigMapName() string { return s.Name + "-rehearsal" }

// TokenSecretName is the Secret holding the coordinator's token.
func (s Spec) TokenSecretName() string {
	if s.TokenSecret != "" {
		return s.TokenSecret
	}
	return s.Name + "-coordinator-token"
}

// tokenEnv reads the coordinator's token from TokenSecretName.
func (s Spec) tokenEnv() corev1.EnvVar {
	return corev1.EnvVar{Name: coordinate.TokenEnv, ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: s.TokenSecretName()},
			Key:                  coordinate.TokenEnv,
		},
	}}
}

// ClaimName is the results claim: Spec.PVC, or the one Manifests creates.
func (s Spec) ClaimName() string {
	if s.PVC != "" {
		return s.PVC
	}
	return s.Name + "-results"
}

func (s Spec) port() int {
	if s.Port == 0 {
		return DefaultPort
	}
	return s.Port
}

// CoordinatorURL is the coordinator as the workers reach it: the
// Service's DNS name (qualified with the namespace when there is one).
func (s Spec) CoordinatorURL() string {
	host := s.ServiceName()
	if s.Namespace != "" {
		host += "." + s.Namespace + ".svc"
	}
	return "http://" + host + ":" + strconv.Itoa(s.port())
}

// WorkerDirs are the N segment bundles, in index order.
func (s Spec) WorkerDirs() []string {
	dirs := make([]string, s.Workers)
	for i := range dirs {
		dirs[i] = fmt.Sprintf("%s/worker-%d", ResultsDir, i)
	}
	return dirs
}

// MergedDir is the merged bundle.
const MergedDir = ResultsDir + "/merged"

// Objects are the manifests in the order they are applied: the rehearsal
// ConfigMap (with a file), the results claim (unless given), the
// coordinator's Service, the collection Job (coordinator, then merge,
// then verify) and the workers' Indexed Job.
func (s Spec) Objects() []any {
	var objs []any
	if s.File != nil {
		objs = append(objs, s.configMap())
	}
	if s.PVC == "" {
		objs = append(objs, s.claim())
	}
	return append(objs, s.service(), s.collectJob(), s.workersJob())
}

// YAML writes Objects as one multi-document YAML stream.
func (s Spec) YAML() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# rehearse k8s: " + strconv.Itoa(s.Workers) + " workers of one rehearsal, merged into " + MergedDir + ".\n")
	b.WriteString("# kubectl apply -f this file; kubectl wait --for=condition=complete job/" + s.CollectName() + "\n")
	for _, o := range s.Objects() {
		y, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}

func (s Spec) meta(name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: s.labels(component)}
}

func (s Spec) labels(component string) map[string]string {
	l := map[string]string{
		"app.kubernetes.io/name":       "rehearse",
		"app.kubernetes.io/instance":   s.Name,
		"app.kubernetes.io/managed-by": "rehearse-k8s",
	}
	if component != "" {
		l["app.kubernetes.io/component"] = component
	}
	return l
}

func (s Spec) configMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: s.meta(s.ConfigMapName(), ""),
		Data:       map[string]string{s.File.Name: s.File.Content},
	}
}

func (s Spec) claim() *corev1.PersistentVolumeClaim {
	size := s.Storage
	if size.IsZero() {
		size = resource.MustParse(DefaultStorage)
	}
	c := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: s.meta(s.ClaimName(), "results"),
		Spec: corev1.PersistentVolumeClaimSpec{
			// Workers on different nodes write to it at once.
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: size},
			},
		},
	}
	if s.StorageClass != "" {
		c.Spec.StorageClassName = &s.StorageClass
	}
	return c
}

func (s Spec) service() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: s.meta(s.ServiceName(), "coordinator"),
		Spec: corev1.ServiceSpec{
			Selector: s.labels("coordinator"),
			// A numeric targetPort: Kubernetes resolves a named one only
			// from containers and sidecar (restartPolicy Always) init
			// containers, and the coordinator is an ordinary init container.
			Ports: []corev1.ServicePort{{
				Name: "coordinate", Port: int32(s.port()), TargetPort: intstr.FromInt32(int32(s.port())),
			}},
			// The coordinator runs as an init container: its pod is not
			// ready while it serves, so its address is published anyway.
			PublishNotReadyAddresses: true,
		},
	}
}

// collectJob is one pod whose containers run in sequence: the
// coordinator (it exits once all N workers are done), then merge, then
// verify. Init containers give the order without a shell in the image.
func (s Spec) collectJob() *batchv1.Job {
	coord := s.container("coordinate", []string{"coordinate", "--workers", strconv.Itoa(s.Workers), "--listen", "0.0.0.0:" + strconv.Itoa(s.port())})
	coord.Ports = []corev1.ContainerPort{{Name: "coordinate", ContainerPort: int32(s.port())}}
	coord.Env = []corev1.EnvVar{s.tokenEnv()}
	merge := s.container("merge", append(append([]string{"merge"}, s.WorkerDirs()...), "-o", MergedDir))
	verify := s.container("verify", []string{"verify", MergedDir})
	pod := s.podSpec()
	pod.InitContainers = []corev1.Container{coord, merge}
	pod.Containers = []corev1.Container{verify}
	return s.job(s.CollectName(), "coordinator", pod, nil)
}

func (s Spec) workersJob() *batchv1.Job {
	args := make([]string, 0, len(s.Args)+8)
	for _, a := range s.Args {
		// Kubernetes expands $(VAR) in args; the user's own text stays
		// literal.
		args = append(args, strings.ReplaceAll(a, "$(", "$$("))
	}
	args = append(args,
		"-o", ResultsDir+"/worker-$("+IndexEnv+")",
		"--segment", "auto/"+strconv.Itoa(s.Workers),
		"--coordinator", s.CoordinatorURL())
	if s.StartAt != "" {
		args = append(args, "--start-at", s.StartAt)
	}
	c := s.container("worker", args)
	c.Env = append([]corev1.EnvVar{{
		Name: IndexEnv,
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			FieldPath: "metadata.annotations['" + IndexAnnotation + "']",
		}},
	}}, c.Env...)
	c.Env = append(c.Env, s.tokenEnv())
	for _, env := range s.APIKeyEnvs {
		c.Env = append(c.Env, corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: s.APIKeySecret},
				Key:                  env,
			},
		}})
	}
	c.Resources = s.Resources
	pod := s.podSpec()
	pod.Containers = []corev1.Container{c}
	n := int32(s.Workers)
	indexed := batchv1.IndexedCompletion
	return s.job(s.WorkersName(), "worker", pod, func(j *batchv1.JobSpec) {
		j.CompletionMode = &indexed
		j.Completions = &n
		j.Parallelism = &n
	})
}

// job wraps a pod in a Job that is never retried: a worker run again
// would release its share late, and a second merge would find the first
// one's bundle.
func (s Spec) job(name, component string, pod corev1.PodSpec, edit func(*batchv1.JobSpec)) *batchv1.Job {
	backoff := int32(0)
	j := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: s.meta(name, component),
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: s.labels(component)},
				Spec:       pod,
			},
		},
	}
	if edit != nil {
		edit(&j.Spec)
	}
	return j
}

func (s Spec) podSpec() corev1.PodSpec {
	p := corev1.PodSpec{
		RestartPolicy:      corev1.RestartPolicyNever,
		ServiceAccountName: s.ServiceAccount,
		Volumes: []corev1.Volume{{
			Name: "results",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: s.ClaimName(),
			}},
		}},
	}
	if s.File != nil {
		p.Volumes = append(p.Volumes, corev1.Volume{
			Name: "rehearsal",
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: s.ConfigMapName()},
			}},
		})
	}
	return p
}

func (s Spec) container(name string, args []string) corev1.Container {
	c := corev1.Container{
		Name:         name,
		Image:        s.Image,
		Command:      []string{Binary},
		Args:         args,
		VolumeMounts: []corev1.VolumeMount{{Name: "results", MountPath: ResultsDir}},
	}
	if s.File != nil {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "rehearsal", MountPath: RehearsalDir, ReadOnly: true})
	}
	return c
}
