package kube

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNamespaceOfIsALabel(t *testing.T) {
	for _, run := range []string{"20261129-021503-ab12", "t123n4t", "Run_With.Dots", strings.Repeat("x", 80), "a--"} {
		ns := NamespaceOf(run)
		if err := CheckName("namespace", ns); err != nil {
			t.Errorf("run %q: %v", run, err)
		}
		if !strings.HasPrefix(ns, "vfleet-") {
			t.Errorf("run %q: namespace %q does not say whose it is", run, ns)
		}
	}
	if a, b := NamespaceOf("t1n2t"), NamespaceOf("t1n3t"); a == b {
		t.Errorf("two runs share namespace %q", a)
	}
}

func TestCheckNameSaysWhy(t *testing.T) {
	err := CheckName("guest", "Pod_0")
	if err == nil || !strings.Contains(err.Error(), `guest "Pod_0"`) || !strings.Contains(err.Error(), "lower case") {
		t.Errorf("err = %v, want the name and Kubernetes' reason", err)
	}
	if err := CheckName("guest", "pod-0"); err != nil {
		t.Error(err)
	}
}

func waiting(reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: AgentContainer, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "said " + reason}}}
}

func TestStuckTellsWaitingFromFailing(t *testing.T) {
	for _, c := range []struct {
		name   string
		status corev1.PodStatus
		stuck  string
	}{
		{"pending", corev1.PodStatus{Phase: corev1.PodPending}, ""},
		{"creating", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{waiting("ContainerCreating")}}, ""},
		{"first pull failed", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{waiting("ErrImagePull")}}, ""},
		{"pull backing off", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{waiting("ImagePullBackOff")}}, "ImagePullBackOff: said ImagePullBackOff"},
		{"never pulled", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{waiting("ErrImageNeverPull")}}, "ErrImageNeverPull"},
		{"crashing", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{waiting("CrashLoopBackOff")}}, "CrashLoopBackOff"},
		// A node may yet be freed, or added.
		{"unschedulable", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available"}}}, ""},
		{"exited", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"}, "Failed: Evicted low on memory"},
	} {
		err := Stuck(&corev1.Pod{Status: c.status})
		switch {
		case c.stuck == "" && err != nil:
			t.Errorf("%s: %v, want to wait on", c.name, err)
		case c.stuck != "" && (!errors.Is(err, ErrPodFailed) || !strings.Contains(err.Error(), c.stuck)):
			t.Errorf("%s: err = %v, want ErrPodFailed saying %q", c.name, err, c.stuck)
		}
	}
}

func at(created time.Time, s int) metav1.Time {
	return metav1.NewTime(created.Add(time.Duration(s) * time.Second))
}

func startedPod(created time.Time, scheduled, ready int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at(created, scheduled)},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at(created, scheduled)},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: at(created, ready)},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at(created, ready)},
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, LastTransitionTime: at(created, 99)},
		}},
	}
}

func TestStartLatencyPerPhase(t *testing.T) {
	created := time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC)
	got := StartLatency(startedPod(created, 1, 4))
	want := map[string]time.Duration{"PodScheduled": time.Second, "Initialized": time.Second, "ContainersReady": 4 * time.Second, "Ready": 4 * time.Second}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
	notYet := startedPod(created, 1, 4)
	notYet.Status.Conditions[3].Status = corev1.ConditionFalse
	if _, ok := StartLatency(notYet)["Ready"]; ok {
		t.Error("a phase whose condition is false has a latency")
	}
}

func TestAgentPodAsked(t *testing.T) {
	a := AgentPod{Namespace: "vfleet-r1", Name: "pod-0", Image: "registry.example/vfleet:1", Pull: corev1.PullNever,
		AgentPath: "/usr/local/bin/vfleet-agent", SocketDir: "/run/vfleet", ScratchDir: "/var/tmp/vfleet",
		RuntimeClass: "gvisor", Node: "n1", MemoryBytes: 256 << 20, MilliCPU: MilliCPU(1.5)}
	p := a.Pod()
	c := p.Spec.Containers[0]
	switch {
	case p.Spec.RuntimeClassName == nil || *p.Spec.RuntimeClassName != "gvisor":
		t.Error("RuntimeClass not asked")
	case p.Spec.NodeName != "n1":
		t.Error("node not asked")
	case c.ImagePullPolicy != corev1.PullNever:
		t.Error("pull policy not Never")
	case c.Resources.Limits.Memory().Value() != 256<<20 || c.Resources.Limits.Cpu().MilliValue() != 1500:
		t.Errorf("limits %v", c.Resources.Limits)
	case !c.Resources.Requests.Memory().Equal(*c.Resources.Limits.Memory()):
		t.Error("requests are not the limits")
	case c.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || *c.SecurityContext.AllowPrivilegeEscalation:
		t.Errorf("the container is not confined as the runtime's default: %+v", c.SecurityContext)
	case p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken:
		t.Error("a token is mounted into the pod")
	case strings.Join(c.Command, " ") != "/usr/local/bin/vfleet-agent --listen /run/vfleet/agent.sock --workdir /var/tmp/vfleet":
		t.Errorf("command %v", c.Command)
	}
	if p := (AgentPod{Image: "x"}).Pod(); p.Spec.RuntimeClassName != nil || p.Spec.Containers[0].Resources.Limits != nil {
		t.Error("an unset RuntimeClass or limit was asked for")
	}
}

func TestBarePodIsTheNodes(t *testing.T) {
	p := AgentPod{Image: "x", Bare: true}.Pod()
	sc := p.Spec.Containers[0].SecurityContext
	switch {
	case !p.Spec.HostNetwork || !p.Spec.HostPID:
		t.Error("the baseline is not in the node's network and PID namespaces")
	case sc.Privileged == nil || !*sc.Privileged:
		t.Error("the baseline is not privileged")
	case sc.SeccompProfile.Type != corev1.SeccompProfileTypeUnconfined:
		t.Errorf("the baseline runs under seccomp %s", sc.SeccompProfile.Type)
	case sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation:
		t.Error("the baseline has no_new_privs set")
	}
	if p := (AgentPod{Image: "x"}).Pod(); p.Spec.HostPID || p.Spec.Containers[0].SecurityContext.Privileged != nil {
		t.Error("a pod that is no baseline shares the node's PIDs or is privileged")
	}
}

func TestParseSelector(t *testing.T) {
	m, err := ParseSelector("kubernetes.io/arch=amd64,vfleet.dev/lab=a")
	if err != nil || len(m) != 2 || m["kubernetes.io/arch"] != "amd64" || m["vfleet.dev/lab"] != "a" {
		t.Errorf("got %v, %v", m, err)
	}
	for _, bad := range []string{"lab", "lab!=a", "Lab Name=a", "lab=a b"} {
		if _, err := ParseSelector(bad); err == nil || !strings.Contains(err.Error(), "want key=value") && !strings.Contains(err.Error(), "label") {
			t.Errorf("%q: err = %v, want it refused, saying why", bad, err)
		}
	}
}

func TestLatestWarningsSayWhyAPodWaits(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	events := []corev1.Event{
		{Reason: "FailedCreatePodSandBox", Message: "no runtime for x", LastTimestamp: metav1.NewTime(t0)},
		{Reason: "FailedCreatePodSandBox", Message: "failed to start shim", EventTime: metav1.NewMicroTime(t0.Add(time.Minute))},
		// Recurring and benign: it must not hide the one that says why.
		{Reason: "MissingClusterDNS", Message: "falling back", LastTimestamp: metav1.NewTime(t0.Add(2 * time.Minute))},
	}
	if got := latestWarnings(events); got != "MissingClusterDNS: falling back; FailedCreatePodSandBox: failed to start shim" {
		t.Errorf("got %q, want the latest of each reason, latest first", got)
	}
	for i := range 5 {
		events = append(events, corev1.Event{Reason: fmt.Sprint("R", i), LastTimestamp: metav1.NewTime(t0.Add(time.Hour))})
	}
	if got := strings.Count(latestWarnings(events), "; "); got != maxWarnings-1 {
		t.Errorf("%d reasons quoted, want %d", got+1, maxWarnings)
	}
	if got := latestWarnings(nil); got != "" {
		t.Errorf("no events: %q", got)
	}
}
