package k8s

import (
	"bytes"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// findPort resolves a Service port's targetPort against a pod spec as the
// endpoints controllers do: it mirrors FindPort of k8s.io/kubernetes
// pkg/api/v1/pod/util.go as it stands from v1.29 (when the loop over
// sidecar init containers came with SidecarContainers) to v1.33, the
// version read. A number is taken as it is; a name is looked up among the
// containers' ports, then among init containers with restartPolicy Always
// only, matching the protocol. The API server defaults an empty protocol
// to TCP on both sides before FindPort sees them; so does this.
func findPort(pod *corev1.PodSpec, svcPort *corev1.ServicePort) (int, error) {
	proto := func(p corev1.Protocol) corev1.Protocol {
		if p == "" {
			return corev1.ProtocolTCP
		}
		return p
	}
	match := func(c corev1.Container) (int, bool) {
		for _, port := range c.Ports {
			if port.Name == svcPort.TargetPort.StrVal && proto(port.Protocol) == proto(svcPort.Protocol) {
				return int(port.ContainerPort), true
			}
		}
		return 0, false
	}
	switch svcPort.TargetPort.Type {
	case intstr.String:
		for _, c := range pod.Containers {
			if p, ok := match(c); ok {
				return p, nil
			}
		}
		for _, c := range pod.InitContainers {
			if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
				continue
			}
			if p, ok := match(c); ok {
				return p, nil
			}
		}
	case intstr.Int:
		return svcPort.TargetPort.IntValue(), nil
	}
	return 0, fmt.Errorf("no suitable port for %s", svcPort.TargetPort.String())
}

// TestFindPortMirror: the mirror itself refuses a name declared only on
// an ordinary init container (the manifests' old Service, issue 28 row
// 16) and finds it on a container or a sidecar.
func TestFindPortMirror(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	named := corev1.Container{Name: "coordinate", Ports: []corev1.ContainerPort{{Name: "coordinate", ContainerPort: 7070}}}
	sidecar := named
	sidecar.RestartPolicy = &always
	byName := &corev1.ServicePort{Port: 7070, TargetPort: intstr.FromString("coordinate")}
	for _, tc := range []struct {
		name string
		pod  corev1.PodSpec
		want int
	}{
		{"ordinary init container", corev1.PodSpec{InitContainers: []corev1.Container{named}}, 0},
		{"sidecar init container", corev1.PodSpec{InitContainers: []corev1.Container{sidecar}}, 7070},
		{"container", corev1.PodSpec{Containers: []corev1.Container{named}}, 7070},
	} {
		got, err := findPort(&tc.pod, byName)
		if got != tc.want || (err == nil) != (tc.want != 0) {
			t.Errorf("%s: %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
}

// TestServiceTargetPortResolves (issue 28 row 16): the coordinator
// Service's every port resolves, by Kubernetes' rule, against the
// generated collect pod to the port the coordinator listens on.
func TestServiceTargetPortResolves(t *testing.T) {
	for _, port := range []int{0, 7171} {
		s := spec()
		s.Port = port
		d := Decode(t, manifest(t, s))
		pod := d.Jobs[s.CollectName()].Spec.Template.Spec
		for _, sp := range d.Services[0].Spec.Ports {
			got, err := findPort(&pod, &sp)
			if err != nil || got != s.port() {
				t.Errorf("port %d: the Service's targetPort %s resolves to %d (%v), want the coordinator's --listen port %d", port, sp.TargetPort.String(), got, err, s.port())
			}
		}
	}
}

// TestTokenFromTheSecret (issue 28 row 4): the coordinator and every
// worker read the token from the Secret by reference; its value is never
// in the manifests.
func TestTokenFromTheSecret(t *testing.T) {
	const token = "tok-never-in-a-manifest"
	t.Setenv("REHEARSE_COORDINATOR_TOKEN", token)
	for _, secret := range []string{"", "my-token"} {
		s := spec()
		s.TokenSecret = secret
		y := manifest(t, s)
		if bytes.Contains(y, []byte(token)) {
			t.Fatal("the token's value is in the manifests")
		}
		d := Decode(t, y)
		coord := d.Jobs[s.CollectName()].Spec.Template.Spec.InitContainers[0]
		worker := d.Jobs[s.WorkersName()].Spec.Template.Spec.Containers[0]
		want := s.Name + "-coordinator-token"
		if secret != "" {
			want = secret
		}
		for _, c := range []corev1.Container{coord, worker} {
			e := env(t, c, "REHEARSE_COORDINATOR_TOKEN")
			if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
				e.ValueFrom.SecretKeyRef.Name != want || e.ValueFrom.SecretKeyRef.Key != "REHEARSE_COORDINATOR_TOKEN" {
				t.Errorf("%s: the token is not a reference to Secret %s: %+v", c.Name, want, e)
			}
		}
	}
}
