package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// TestPodsThroughTheAPIServer runs vfleet's pods on a real cluster (one
// node): the run's namespace and a pod, each in the ledger first; the
// agent reached by exec through the API server; the pod's start-up per
// phase; a pod that cannot start refused with the node's reason; and a
// clean after a crash that leaves nothing of the run in the cluster.
func TestPodsThroughTheAPIServer(t *testing.T) {
	testutil.SharesMachine(t)
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	kc := testutil.Kube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := Connect(Target{Kubeconfig: kc.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	led, err := ledger.Create(root, "run")
	if err != nil {
		t.Fatal(err)
	}
	run := testutil.RunID(t)
	ns := NamespaceOf(run)
	labels := map[string]string{LabelManagedBy: ManagedBy, LabelRun: run}
	if _, err := c.RecordNamespace(led, ns); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateNamespace(ctx, ns, labels); err != nil {
		t.Fatal(err)
	}
	// Once more, as a second guest of the run does: taken as it is.
	if err := c.CreateNamespace(ctx, ns, labels); err != nil {
		t.Errorf("the run's own namespace refused the second time: %v", err)
	}
	other := map[string]string{LabelManagedBy: ManagedBy, LabelRun: run + "x"}
	if err := c.CreateNamespace(ctx, ns, other); err == nil || !strings.Contains(err.Error(), "not this run's") {
		t.Errorf("another run's namespace taken: %v", err)
	}

	spec := AgentPod{Namespace: ns, Name: "pod-0", Labels: labels, Image: kc.AgentImage, Pull: corev1.PullNever,
		AgentPath: image.AgentPath, SocketDir: guest.AgentSocketDir, ScratchDir: guest.ScratchDir,
		MemoryBytes: 128 << 20, MilliCPU: MilliCPU(0.5)}
	if _, err := c.RecordPod(led, ns, spec.Name); err != nil {
		t.Fatal(err)
	}
	if err := c.CreatePod(ctx, spec.Pod()); err != nil {
		t.Fatal(err)
	}
	seen := map[string]time.Time{}
	pod, err := c.WaitReady(ctx, ns, spec.Name, seen)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != kc.Node {
		t.Errorf("scheduled on %q, want the cluster's one node %q", pod.Spec.NodeName, kc.Node)
	}
	if pod.Status.PodIP == "" || pod.Status.PodIP == pod.Status.HostIP {
		t.Errorf("pod address %q (node's %q): want one of its own from the network plugin", pod.Status.PodIP, pod.Status.HostIP)
	}
	if s, r := seen["PodScheduled"], seen["Ready"]; s.IsZero() || r.Before(s) {
		t.Errorf("phases seen %v: want PodScheduled, then Ready", seen)
	}
	lat := StartLatency(pod)
	for _, ph := range []string{"PodScheduled", "ContainersReady", "Ready"} {
		if _, ok := lat[ph]; !ok {
			t.Errorf("no start latency for %s: %v", ph, lat)
		}
	}

	conn, err := c.Exec(ctx, ns, spec.Name, AgentContainer, spec.AgentStdio())
	if err != nil {
		t.Fatal(err)
	}
	client, err := agent.NewClient(ctx, conn)
	if err != nil {
		t.Fatalf("agent through exec: %v (stream: %v)", err, conn.Err())
	}
	r, err := client.Do(ctx, agent.Request{Argv: []string{"sh", "-c", "cat /proc/self/cgroup | grep -c kubepods; hostname"}})
	if err != nil || !r.Succeeded() {
		t.Fatalf("exec through the agent: %v %+v", err, r)
	}
	if out := strings.Fields(string(r.Stdout)); len(out) != 2 || out[0] == "0" || out[1] != spec.Name {
		t.Errorf("the agent's command ran outside the pod: %q", r.Stdout)
	}
	if err := client.Close(); err != nil {
		t.Error(err)
	}

	t.Run("ImageNotThere", func(t *testing.T) {
		bad := spec
		bad.Name, bad.Image = "pod-missing", "vfleet.invalid/no-such-image:1"
		e, err := c.RecordPod(led, ns, bad.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.CreatePod(ctx, bad.Pod()); err != nil {
			t.Fatal(err)
		}
		_, err = c.WaitReady(ctx, ns, bad.Name, nil)
		if !errors.Is(err, ErrPodFailed) || !strings.Contains(err.Error(), "ErrImageNeverPull") {
			t.Errorf("err = %v, want ErrPodFailed with the node's reason", err)
		}
		if err := led.Release(ctx, e); err != nil {
			t.Fatal(err)
		}
		if err := c.get(ctx, object{ns, "pods", bad.Name}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
			t.Errorf("released pod still there: %v", err)
		}
	})

	// A pod that waits where it cannot start (its runtime's handler is
	// not the node's) times out saying why, as the kubelet warned.
	t.Run("WaitSaysWhy", func(t *testing.T) {
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "vfleet-test-nohandler"}, Handler: "nohandler"}
		if err := c.node.Post().Resource("runtimeclasses").Body(rc).Do(ctx).Error(); err != nil {
			t.Fatal(err)
		}
		defer c.node.Delete().Resource("runtimeclasses").Name(rc.Name).Do(context.Background())
		bad := spec
		bad.Name, bad.RuntimeClass = "pod-nohandler", rc.Name
		e, err := c.RecordPod(led, ns, bad.Name)
		if err != nil {
			t.Fatal(err)
		}
		defer led.Release(context.Background(), e)
		if err := c.CreatePod(ctx, bad.Pod()); err != nil {
			t.Fatal(err)
		}
		// The kubelet warns within a second or two of its first attempt.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err = c.WaitReady(wctx, ns, bad.Name, nil)
		if err == nil || !strings.Contains(err.Error(), "FailedCreatePodSandBox: ") || !strings.Contains(err.Error(), "the cluster warned: ") || !strings.Contains(err.Error(), "nohandler") {
			t.Errorf("err = %v, want the kubelet's warning naming the handler", err)
		}
	})

	// The run dies here: a clean reads its ledger, as `vfleet clean` does,
	// and deletes the pod and the namespace.
	if left, err := c.Leftovers(ctx, run); err != nil || len(left) != 2 {
		t.Errorf("the run has %v in the cluster (%v), want its namespace and its pod", left, err)
	}
	removed, err := ledger.CleanRun(ctx, root, "run", ledger.CleanOptions{Force: true})
	if err != nil {
		t.Fatalf("clean: %v (%+v)", err, removed)
	}
	if len(removed) != 2 {
		t.Errorf("clean removed %+v, want the pod and the namespace", removed)
	}
	led.Close()
	if left, err := c.Leftovers(ctx, run); err != nil || len(left) > 0 {
		t.Errorf("left in the cluster after clean: %v %v", left, err)
	}

	testutil.CheckLeaks(t, before)
}
