package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/image"
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
	// before are the processes of kubeProcesses there before this
	// process started the cluster.
	before map[string]bool
}

// KubeNode is the fixture's node.
const KubeNode = "localhost"

// kubeBridge is the pods' network's bridge (scripts/k8s-fixture.sh).
const kubeBridge = "vfk8s0"

// Kube gives the test the cluster, started if no test process runs it:
// the tests of every package that want it use one cluster at once, each
// holding the lock file beside its directory shared while it does, and
// the test process that started it stops it at its end (or, without
// Main, at its test's end) once it can hold that lock alone. So the
// cluster outlives the test: only a test that shares the machine
// (SharesMachine), whose leak check counts only the names it made, may
// use it, and the stop checks what the cluster leaves. Its programs are
// built once per machine and version (TestPrepareFixtures builds them
// beside the suite).
func Kube(t testing.TB) *KubeCluster {
	t.Helper()
	if !sharesMachine(t) {
		t.Fatal("testutil.Kube outlives the test: its test must share the machine (testutil.SharesMachine)")
	}
	RequiresRoot(t)
	for _, tool := range [][2]string{{"containerd", "containerd"}, {"etcd", "etcd-server"}, {"openssl", "openssl"}} {
		RequiresTool(t, tool[0], tool[1])
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		t.Skip("the CNI plugins are not installed (Debian package containernetworking-plugins)")
	}
	dir := filepath.Join(StateRoot(), "k8s")
	c := &KubeCluster{
		Kubeconfig: filepath.Join(dir, "admin.kubeconfig"),
		Node:       KubeNode,
		script:     filepath.Join(ModuleRoot(t), "scripts", "k8s-fixture.sh"),
		env:        append(os.Environ(), "VFLEET_K8S_DIR="+dir, "VFLEET_K8S_ROOTFS="+Image(t).RootFS),
	}
	// A start and a stop take turns on this lock.
	start := lockFile(t, dir+".start.lock", unix.LOCK_EX)
	defer start.Close()
	// The process that runs the cluster holds this one for as long as it
	// does: where nobody holds it, a cluster still there is what a killed
	// test process left, which this one stops before it starts its own.
	owner, err := flockFile(dir+".owner.lock", unix.LOCK_EX|unix.LOCK_NB)
	if err != nil && !errors.Is(err, unix.EWOULDBLOCK) {
		t.Fatal(err)
	}
	if err == nil {
		if err := c.fixture("stop"); err != nil {
			owner.Close()
			t.Fatal(err)
		}
		c.before = kubeProcesses()
		stop := func() error {
			defer owner.Close()
			start, err := flockFile(dir+".start.lock", unix.LOCK_EX)
			if err != nil {
				return err
			}
			defer start.Close()
			// Every test that uses it has ended.
			users, err := flockFile(dir+".lock", unix.LOCK_EX)
			if err != nil {
				return err
			}
			defer users.Close()
			return c.stop()
		}
		if err := c.fixture("start"); err != nil {
			// Nobody else waits for a cluster that failed to start: it
			// goes now, with what its start made.
			err = errors.Join(err, c.stop())
			owner.Close()
			t.Fatal(err)
		}
		if !atProcessEnd(stop) {
			t.Cleanup(func() {
				if err := stop(); err != nil {
					t.Error(err)
				}
			})
		}
	}
	users := lockFile(t, dir+".lock", unix.LOCK_SH)
	t.Cleanup(func() { users.Close() })
	ref, err := os.ReadFile(filepath.Join(dir, "agent-image"))
	if err != nil {
		t.Fatal(err)
	}
	c.AgentImage = strings.TrimSpace(string(ref))
	return c
}

// lockFile holds path's flock as how says until the file is closed.
func lockFile(t testing.TB, path string, how int) *os.File {
	t.Helper()
	f, err := flockFile(path, how)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func flockFile(path string, how int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return f, nil
}

// stop stops the cluster and removes all it made but the build cache,
// then looks for what it left: a running program of the cluster's, its
// pods' bridge, a mount in its directory.
func (c *KubeCluster) stop() error {
	if err := c.fixture("stop"); err != nil {
		return err
	}
	var left []string
	for p := range kubeProcesses() {
		if !c.before[p] {
			left = append(left, p)
		}
	}
	if rootLinks()[kubeBridge] {
		left = append(left, "link "+kubeBridge)
	}
	ms, err := MountPoints("/proc")
	if err != nil {
		return err
	}
	dir := filepath.Join(StateRoot(), "k8s") + "/"
	for _, m := range ms {
		if strings.HasPrefix(m, dir) {
			left = append(left, "mount "+m)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("the Kubernetes fixture's stop left %v", left)
	}
	return nil
}

// kubeProcesses are the running programs of the kind the cluster runs
// (as /proc/PID/comm names them) that a test could leave (processes): one
// not there before the cluster started is the cluster's.
func kubeProcesses() map[string]bool {
	out := map[string]bool{}
	for p := range processes(nil) {
		if slices.ContainsFunc([]string{"containerd", "etcd", "kube-apiserver", "kube-controller", "kube-scheduler", "kubelet"},
			func(name string) bool { return strings.Contains(p, "("+name) }) {
			out[p] = true
		}
	}
	return out
}

// BuildKube builds what the cluster runs, once per machine, without
// holding the machine: TestPrepareFixtures builds it beside the tests, and
// a hold there (ImageOf's) stops every one of them until all the fixtures
// are built.
func BuildKube(t testing.TB) {
	t.Helper()
	c := &KubeCluster{script: filepath.Join(ModuleRoot(t), "scripts", "k8s-fixture.sh"),
		env: append(os.Environ(), "VFLEET_K8S_ROOTFS="+ensureImage(t, image.Variant{}, BuildAgent(t)).RootFS)}
	c.run(t, "build")
}

func (c *KubeCluster) run(t testing.TB, verb string) {
	t.Helper()
	if err := c.fixture(verb); err != nil {
		t.Fatal(err)
	}
}

// fixture runs the fixture's script with verb.
func (c *KubeCluster) fixture(verb string) error {
	cmd := exec.Command(c.script, verb)
	cmd.Env = c.env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("k8s fixture %s: %v\n%s", verb, err, out)
	}
	return nil
}
