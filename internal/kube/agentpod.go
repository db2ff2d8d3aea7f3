package kube

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentContainer is the name of the container that runs vfleet's agent in
// each of vfleet's pods.
const AgentContainer = "agent"

// AgentPod describes one of vfleet's pods: its agent's container, what
// it may use, and where it goes.
type AgentPod struct {
	Namespace, Name string
	// Labels are the pod's (LabelManagedBy, LabelRun, LabelGuest).
	Labels map[string]string
	// Image is the reference the cluster pulls vfleet's image by, as
	// Pull says (empty: if the node lacks it; Never runs only what the
	// node has, an image imported there).
	Image string
	Pull  corev1.PullPolicy
	// AgentPath is the agent's path in the image; SocketDir and
	// ScratchDir are where it listens and where file I/O workloads write.
	AgentPath, SocketDir, ScratchDir string
	// RuntimeClass names the pod's RuntimeClass; empty for the cluster's
	// default runtime.
	RuntimeClass string
	// Node is the node the pod runs on, named; empty lets the scheduler
	// choose among the nodes that NodeSelector picks.
	Node         string
	NodeSelector map[string]string
	// HostNetwork runs the pod in its node's network namespace instead of
	// one the cluster's network plugin (CNI) gives it.
	HostNetwork bool
	// Bare makes the pod its node's bare baseline, as node exporters run:
	// privileged, in the node's network and PID namespaces, unconfined by
	// seccomp (HostNetwork implied).
	Bare bool
	// MemoryBytes and MilliCPU limit the container (and request as much,
	// so that what is measured is what was placed); 0 for no limit.
	MemoryBytes int64
	MilliCPU    int64
}

// Pod is the pod as the API server takes it.
func (a AgentPod) Pod() *corev1.Pod {
	no := false
	grace := int64(podGrace)
	var limits corev1.ResourceList
	if a.MemoryBytes > 0 || a.MilliCPU > 0 {
		limits = corev1.ResourceList{}
		if a.MemoryBytes > 0 {
			limits[corev1.ResourceMemory] = *resource.NewQuantity(a.MemoryBytes, resource.BinarySI)
		}
		if a.MilliCPU > 0 {
			limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(a.MilliCPU, resource.DecimalSI)
		}
	}
	pull := a.Pull
	if pull == "" {
		pull = corev1.PullIfNotPresent
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Name, Labels: a.Labels},
		Spec: corev1.PodSpec{
			// The agent asks the API server nothing: no token in the pod.
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			NodeName:                      a.Node,
			NodeSelector:                  a.NodeSelector,
			HostNetwork:                   a.HostNetwork,
			Containers: []corev1.Container{{
				Name:            AgentContainer,
				Image:           a.Image,
				ImagePullPolicy: pull,
				Command:         []string{a.AgentPath, "--listen", a.SocketDir + "/agent.sock", "--workdir", a.ScratchDir},
				Resources:       corev1.ResourceRequirements{Limits: limits, Requests: limits},
				// What vfleet's other kinds call default: the container
				// runtime's own seccomp profile and no new privileges. A
				// pod that names none runs unconfined unless the node's
				// kubelet defaults to the runtime's profile.
				SecurityContext: &corev1.SecurityContext{
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					AllowPrivilegeEscalation: &no,
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "agent-socket", MountPath: a.SocketDir},
					{Name: "scratch", MountPath: a.ScratchDir},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "agent-socket", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	if a.RuntimeClass != "" {
		p.Spec.RuntimeClassName = &a.RuntimeClass
	}
	if a.Bare {
		yes := true
		p.Spec.HostNetwork, p.Spec.HostPID = true, true
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
			Privileged:     &yes,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined},
		}
	}
	return p
}

// AgentStdio is the command that serves one session of the agent's
// protocol on standard input and output: what Exec runs in a pod to reach
// the agent through the API server.
func (a AgentPod) AgentStdio() []string {
	return []string{a.AgentPath, "--stdio", "--workdir", a.ScratchDir}
}

// MilliCPU is a CPU count (1.5) in Kubernetes' thousandths of a CPU.
func MilliCPU(cpus float64) int64 { return int64(cpus*1000 + 0.5) }
