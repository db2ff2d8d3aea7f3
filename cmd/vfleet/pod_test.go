package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/vfleet/vfleet/internal/guest/pod"
	"github.com/vfleet/vfleet/internal/kube"
	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/scenarios"
)

// podScenario is a run of pods on the tests' one-node cluster beside the
// bare host, repetitions as asked, their image the one imported there.
// Their CPU (requested as limited) leaves room on the node's two for
// another package's test's pods on the cluster at the same time.
func podScenario(kc *testutil.KubeCluster, reps int) string {
	return podScenarioOf(kc, kc.AgentImage, "never", reps, "")
}

// podScenarioOf is podScenario with the pods' image and pull policy, and
// more lines of their group.
func podScenarioOf(kc *testutil.KubeCluster, image, pull string, reps int, more string) string {
	return fmt.Sprintf(`name: pods
repetitions: %d
warmup: 0
duration: 1s
guests:
  - {name: host, kind: host}
  - name: pod
    kind: pod
    count: 2
    memory: 256MiB
    cpu_limit: 0.5
    kubeconfig: %s
    pod_image: %s
    image_pull: %s
    node: [%s]
%sworkloads:
  - workload: cpu
`, reps, kc.Kubeconfig, image, pull, kc.Node, more)
}

// TestPodRunOnACluster runs a scenario with a group of pods on a real
// cluster beside the bare host: the run's table compares them, each pod's
// record says where and how it started; then a run killed with SIGKILL
// leaves its pods, which `vfleet clean` deletes with their namespace, and
// one stopped with Ctrl-C takes them away itself.
func TestPodRunOnACluster(t *testing.T) {
	testutil.SharesMachine(t)
	// Its pods' work is a few seconds of cpu; the rest is waiting on the
	// cluster, beside another test's guests.
	t.Parallel()
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	kc := testutil.Kube(t)
	cluster, err := kube.Connect(kube.Target{Kubeconfig: kc.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	left := func(key string) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := cluster.Leftovers(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	c := newCLI(t)

	stdout, stderr, code := c.run("run", c.scenario(podScenario(kc, 1)))
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "pod") || !strings.Contains(stdout, "cpu") {
		t.Errorf("the table has no row of the pods:\n%s", stdout)
	}
	key := c.latestRunKey()
	if l := left(key); len(l) > 0 {
		t.Errorf("left in the cluster after the run: %v", l)
	}
	d := c.latestGuests()["pod-1"]
	if d["node"] != kc.Node || d["start_Ready_s"] == "" || !strings.HasPrefix(d["container_runtime"], "containerd://") || d["namespace"] != kube.NamespaceOf(key) {
		t.Errorf("the record of pod-1 says %v", d)
	}

	// The way a user puts vfleet's image where a cluster pulls it: pushed
	// to a registry (on loopback here, go-containerregistry's, which
	// speaks the distribution API), pulled by the node.
	t.Run("FromARegistry", func(t *testing.T) {
		srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		defer srv.Close()
		ref := strings.TrimPrefix(srv.URL, "http://") + "/vfleet/agent:test"
		stdout, stderr, code := c.run("image", "push", ref)
		if code != 0 || !strings.Contains(stdout, "/vfleet/agent@sha256:") {
			t.Fatalf("image push: exit %d\n%s\n%s", code, stdout, stderr)
		}
		byDigest := strings.TrimSpace(stdout)
		stdout, stderr, code = c.run("run", c.scenario(podScenarioOf(kc, byDigest, "always", 1, "")))
		if code != 0 {
			t.Fatalf("run of the pushed image: exit %d\n%s\n%s", code, stdout, stderr)
		}
		if got := c.latestGuests()["pod-0"]["image"]; got != byDigest {
			t.Errorf("the pod ran image %q, want %q", got, byDigest)
		}
	})

	// Each isolation technology of a cluster is a RuntimeClass: the
	// cluster's runc, named; one it lacks is refused before anything
	// starts, naming those it has.
	// A node chosen by its labels (node_selector) instead of its name.
	bySelector := func(src, labels string) string {
		return strings.Replace(src, "    node: ["+kc.Node+"]\n", "    node_selector: "+labels+"\n", 1)
	}
	t.Run("RuntimeClass", func(t *testing.T) {
		stdout, stderr, code := c.run("run", c.scenario(bySelector(podScenarioOf(kc, kc.AgentImage, "never", 1, "    runtime: runc\n"), "kubernetes.io/hostname="+kc.Node)))
		if code != 0 {
			t.Fatalf("run under RuntimeClass runc: exit %d\n%s\n%s", code, stdout, stderr)
		}
		if d := c.latestGuests()["pod-0"]; d["runtime_class"] != "runc" || d["node"] != kc.Node {
			t.Errorf("the pod records RuntimeClass %q on node %q, want runc on %s", d["runtime_class"], d["node"], kc.Node)
		}
		_, stderr, code = c.run("run", c.scenario(bySelector(podScenario(kc, 1), "vfleet.dev/lab=none")))
		if code == 0 || !strings.Contains(stderr, "has no node with the labels vfleet.dev/lab=none") {
			t.Errorf("a selector no node matches: exit %d, stderr %s", code, stderr)
		}
		_, stderr, code = c.run("run", c.scenario(podScenarioOf(kc, kc.AgentImage, "never", 1, "    runtime: kata\n")))
		if code == 0 || !strings.Contains(stderr, `has no RuntimeClass "kata" (it has [gvisor runc])`) {
			t.Errorf("a RuntimeClass the cluster lacks: exit %d, stderr %s", code, stderr)
		}
	})

	// The built-in that compares a cluster's runtimes with its node: run
	// as a user runs it (the cluster and image from the environment),
	// shortened; a RuntimeClass the cluster lacks is left out and named.
	t.Run("BuiltIn", func(t *testing.T) {
		src, err := scenarios.Lookup("kube-runtimes")
		if err != nil {
			t.Fatal(err)
		}
		short := strings.NewReplacer("repetitions: 3", "repetitions: 1", "duration: 2s", "duration: 1s", "count: 2", "count: 1",
			"  - workload: stream\n", "", "  - workload: syscall\n", "").Replace(string(src))
		env := c.env
		c.env = append(slices.Clip(env), "KUBECONFIG="+kc.Kubeconfig, pod.EnvImage+"="+kc.AgentImage)
		defer func() { c.env = env }()
		stdout, stderr, code := c.run("run", c.scenario(short))
		if code != 0 {
			t.Fatalf("run: exit %d\n%s\n%s", code, stdout, stderr)
		}
		if !strings.Contains(stdout, "kata-qemu") || !strings.Contains(stdout, `has no RuntimeClass "kata-qemu"`) {
			t.Errorf("the report does not name the RuntimeClasses left out:\n%s", stdout)
		}
		// The round trip to the run's peer pod, on the cluster's network;
		// this host's CPU counters are not the nodes'.
		if !strings.Contains(stdout, "tcp-rr net.rtt_us ") || strings.Contains(stdout, "net.host_busy_cores") {
			t.Errorf("want the pods' round trips, without this host's CPU as theirs:\n%s", stdout)
		}
		guests := c.latestGuests()
		if d := guests["node"]; d["security"] != "privileged" || d["network"] != "the node's own (host_network)" || d["node"] != kc.Node {
			t.Errorf("the node's baseline records %v", d)
		}
		if d := guests["default"]; d["security"] != "default" || d["runtime_class"] != "the cluster's default" {
			t.Errorf("the pod under the default runtime records %v", d)
		}
		if d := guests["gvisor"]; d["runtime_class"] != "gvisor" || d["net.path"] != "own" || !strings.HasPrefix(d["net.peer"], "198.19.1.") {
			t.Errorf("the pod under gVisor records %v", d)
		}
		if d := guests["peer-pod-1"]; d["pod"] != "peer-pod-1" || d["runtime_class"] != "the cluster's default" {
			t.Errorf("the peer pod records %v", d)
		}
		// The audit sees what each was given, in the groups' order: the
		// baseline weaker than a runtime's default (privileged, the
		// node's PIDs), gVisor stronger (a kernel of its own).
		var counts [][2]int
		for _, m := range regexp.MustCompile(`(\d+) weaker, (\d+) stronger`).FindAllStringSubmatch(stdout, -1) {
			w, _ := strconv.Atoi(m[1])
			st, _ := strconv.Atoi(m[2])
			counts = append(counts, [2]int{w, st})
		}
		if len(counts) < 3 || counts[0][0] == 0 || counts[1] != [2]int{0, 0} || counts[2][1] == 0 {
			t.Errorf("audit (weaker, stronger) per group %v, want the node weaker, the default even, gVisor stronger:\n%s", counts, stdout)
		}
	})

	t.Run("SIGKILLThenClean", func(t *testing.T) {
		cmd, _ := startRun(t, c, c.scenario(podScenario(kc, 20)), "measure:")
		key := c.latestRunKey()
		cmd.Process.Kill()
		cmd.Wait()
		if l := left(key); len(l) != 3 {
			t.Fatalf("a killed run left %v in the cluster, want its namespace and two pods (the test must be able to fail)", l)
		}
		stdout, stderr, code := c.run("clean")
		if code != 0 || !strings.Contains(stdout, "removed kube-namespace "+kube.NamespaceOf(key)) {
			t.Errorf("clean: exit %d\n%s\n%s", code, stdout, stderr)
		}
		if l := left(key); len(l) > 0 {
			t.Errorf("left in the cluster after clean: %v", l)
		}
	})

	t.Run("CtrlC", func(t *testing.T) {
		cmd, _ := startRun(t, c, c.scenario(podScenario(kc, 20)), "measure:")
		key := c.latestRunKey()
		cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
			t.Fatal("the interrupted run did not end")
		}
		if l := left(key); len(l) > 0 {
			t.Errorf("left in the cluster after Ctrl-C: %v", l)
		}
	})
}

// What a group of pods cannot be is refused at its line, before anything
// reaches a cluster; an image reference that cannot be pushed to, before
// anything is built.
func TestPodGroupRefusedWhereItCannotGo(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct{ scenario, want string }{
		{`name: p
network: {path: bridge}
guests:
  - {name: host, kind: host}
  - {name: pod, kind: pod, pod_image: registry.example/vfleet:1, network: macvlan}
workloads:
  - {id: rr, workload: net-latency, params: {proto: tcp}}
`, "kind pod is on the network of the system its guests run in"},
		{`name: p
guests:
  - {name: host, kind: host}
  - {name: pod, kind: pod}
workloads:
  - workload: cpu
`, "pod_image is missing"},
		{`name: p
guests:
  - {name: host, kind: host}
  - {name: pod, kind: pod, pod_image: r.example/v:1, cpus: "0"}
workloads:
  - workload: cpu
`, "cpu_limit caps"},
	} {
		_, stderr, code := c.run("run", c.scenario(tc.scenario))
		if code != 2 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "s.yaml:") {
			t.Errorf("exit %d, stderr %q; want 2 and %q at its line", code, stderr, tc.want)
		}
	}
	if _, stderr, code := c.run("image", "push", "registry.example/vfleet"); code != 2 || !strings.Contains(stderr, "REGISTRY/REPOSITORY:TAG") {
		t.Errorf("image push without a tag: exit %d, stderr %q", code, stderr)
	}
}
