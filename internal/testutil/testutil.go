package testutil

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/procfs"
)

// RequiresRoot skips an integration test that needs root, saying why; with
// -short every integration test is skipped. A test that runs holds the
// machine until it ends (see holdMachine).
func RequiresRoot(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("integration test: needs root (namespaces, mounts, containers)")
	}
	holdMachine(t)
}

// RequiresTool skips when an external program is not installed.
func RequiresTool(t testing.TB, name, debianPackage string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed (Debian package %s)", name, debianPackage)
	}
}

// ModuleRoot is the repository's top directory.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	moduleRoot.once.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			moduleRoot.err = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		moduleRoot.dir = filepath.Dir(strings.TrimSpace(string(out)))
	})
	if moduleRoot.err != nil {
		t.Fatal(moduleRoot.err)
	}
	return moduleRoot.dir
}

var moduleRoot struct {
	once sync.Once
	dir  string
	err  error
}

// BuildBinary builds a command of this module, static, and returns its
// path. A test process builds each command once, however many of its
// tests ask: the binary is shared, so a test must not change it.
func BuildBinary(t testing.TB, pkg, name string) string {
	return buildFor(t, pkg, name, runtime.GOARCH)
}

// builtBinaries holds what this test process built, each in a directory of
// its own (so that a command finds its siblings, as vfleet its agent) under
// a directory named for the process.
var builtBinaries struct {
	sync.Mutex
	dir   string
	paths map[string]string
}

// builtPrefix names the directories of built binaries: the process id
// follows, so that a later test process can remove those of processes
// that are gone.
const builtPrefix = "vfleet-test-bin-"

func buildFor(t testing.TB, pkg, name, arch string) string {
	t.Helper()
	b := &builtBinaries
	b.Lock()
	defer b.Unlock()
	key := pkg + " " + name + " " + arch
	if p, ok := b.paths[key]; ok {
		return p
	}
	if b.dir == "" {
		removeStaleBuilds()
		dir, err := os.MkdirTemp("", builtPrefix+strconv.Itoa(os.Getpid())+"-")
		if err != nil {
			t.Fatal(err)
		}
		b.dir, b.paths = dir, map[string]string{}
	}
	out := filepath.Join(b.dir, arch, name)
	cmd := exec.Command("go", "build", "-o", out, "./"+pkg)
	cmd.Dir = ModuleRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH="+arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	b.paths[key] = out
	return out
}

// removeStaleBuilds removes the binaries of test processes that have
// ended: nothing else would, since a test process has no last cleanup.
func removeStaleBuilds() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), builtPrefix+"*"))
	for _, d := range dirs {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), builtPrefix), "-")
		n, err := strconv.Atoi(pid)
		if err != nil || n == os.Getpid() {
			continue
		}
		if err := syscall.Kill(n, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}

// BuildAgent builds the static agent.
func BuildAgent(t testing.TB) string { return BuildBinary(t, "cmd/vfleet-agent", "vfleet-agent") }

// BuildAgentFor builds the static agent for a Debian architecture.
func BuildAgentFor(t testing.TB, arch string) string {
	return buildFor(t, "cmd/vfleet-agent", "vfleet-agent-"+arch, arch)
}

// StateRoot is where integration tests keep images between runs, apart
// from a user's own /var/lib/vfleet.
func StateRoot() string {
	if v := os.Getenv("VFLEET_TEST_STATE_DIR"); v != "" {
		return v
	}
	return "/var/cache/vfleet-test"
}

// Image returns the default guest image, built on first use, with a freshly
// built agent installed.
func Image(t testing.TB) *image.Image { return ImageFor(t, image.HostArch) }

// ImageFor returns vfleet's image for a Debian architecture, built on
// first use (under emulation for a foreign one, which takes minutes),
// with a freshly built agent of that architecture installed.
func ImageFor(t testing.TB, arch string) *image.Image {
	t.Helper()
	return ImageOf(t, image.Variant{Arch: arch})
}

// ImageOf returns one of vfleet's images, built on first use, with a
// freshly built agent of its architecture installed.
func ImageOf(t testing.TB, v image.Variant) *image.Image {
	t.Helper()
	RequiresRoot(t)
	return ensureImage(t, v, BuildAgentFor(t, cmp.Or(v.Arch, image.HostArch)))
}

// ensureImage is ImageOf without the machine: building an image changes
// nothing a leak check looks at, so it may run beside integration tests.
func ensureImage(t testing.TB, v image.Variant, agent string) *image.Image {
	t.Helper()
	RequiresTool(t, "mmdebstrap", "mmdebstrap")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	img, err := image.Ensure(ctx, image.EnsureOptions{
		Root: StateRoot(), Recipe: image.RecipeOf(v), AgentBinary: agent,
		Progress: func(line string) { t.Log("image:", line) },
	})
	if err != nil {
		t.Fatalf("guest image: %v", err)
	}
	return img
}

// DeadProcess is a process that has exited and been reaped: what a killed
// vfleet is to the runs and fleets it owned.
func DeadProcess(t testing.TB) procfs.Process {
	t.Helper()
	child := exec.Command("true")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	dead, err := procfs.Find(child.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Wait(); err != nil {
		t.Fatal(err)
	}
	return dead
}
