package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// KubeCluster is the one-node Kubernetes cluster of
// scripts/k8s-fixture.sh, on loopback, its node running pods of the
// tests' image (the agent they built in it) imported, not pulled.
type KubeCluster struct {
	// Kubeconfig is the admin's: a bearer token, the API server on
	// loopback.
	Kubeconfig string
	// AgentImage is the reference of the tests' image in the node's
	// containerd; a pod must not pull it (PullNever).
	AgentImage string
	// Node is the node's name.
	Node string

	script string
	env    []string
}

// KubeNode is the fixture's node.
const KubeNode = "localhost"

// kubeBridge is the pods' network's bridge (scripts/k8s-fixture.sh).
const kubeBridge = "vfk8s0"

// Kube starts the cluster for the test and stops it when the test ends
// (Stop, to check what it leaves before then); another test that wants it
// waits. The test may share the machine (SharesMachine): what the cluster
// makes carries names its leak check then counts as the test's own (its
// directory, its programs, its bridge, its pods' namespaces and mounts),
// and the kernel settings its kubelet changes while it runs are ones no
// other test reads. Its programs are built once per machine and version
// (TestPrepareFixtures builds them beside the suite).
func Kube(t testing.TB) *KubeCluster {
	t.Helper()
	RequiresRoot(t)
	for _, tool := range [][2]string{{"containerd", "containerd"}, {"etcd", "etcd-server"}, {"openssl", "openssl"}} {
		RequiresTool(t, tool[0], tool[1])
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		t.Skip("the CNI plugins are not installed (Debian package containernetworking-plugins)")
	}
	dir := filepath.Join(StateRoot(), "k8s")
	// One cluster per machine: tests of other packages that want it wait
	// for this one's to stop.
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		lock.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	ScopeLeaks(t, func() []string {
		return []string{dir + "/", "(containerd", "(etcd)", "(kube", "/run/containerd/", "network namespace cni-", "link " + kubeBridge}
	})
	c := &KubeCluster{
		Kubeconfig: filepath.Join(dir, "admin.kubeconfig"),
		Node:       KubeNode,
		script:     filepath.Join(ModuleRoot(t), "scripts", "k8s-fixture.sh"),
		env:        append(os.Environ(), "VFLEET_K8S_DIR="+dir, "VFLEET_K8S_ROOTFS="+Image(t).RootFS),
	}
	t.Cleanup(func() { c.Stop(t) })
	c.run(t, "start")
	ref, err := os.ReadFile(filepath.Join(dir, "agent-image"))
	if err != nil {
		t.Fatal(err)
	}
	c.AgentImage = strings.TrimSpace(string(ref))
	return c
}

// Stop stops the cluster and removes all it made but the build cache;
// stopping one stopped already does nothing.
func (c *KubeCluster) Stop(t testing.TB) {
	t.Helper()
	c.run(t, "stop")
}

// BuildKube builds what the cluster runs, once per machine.
func BuildKube(t testing.TB) {
	t.Helper()
	c := &KubeCluster{script: filepath.Join(ModuleRoot(t), "scripts", "k8s-fixture.sh"),
		env: append(os.Environ(), "VFLEET_K8S_ROOTFS="+Image(t).RootFS)}
	c.run(t, "build")
}

func (c *KubeCluster) run(t testing.TB, verb string) {
	t.Helper()
	cmd := exec.Command(c.script, verb)
	cmd.Env = c.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("k8s fixture %s: %v\n%s", verb, err, out)
	}
}
