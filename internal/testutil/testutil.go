package testutil

import (
	"cmp"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/procfs"
)

// RequiresRoot skips an integration test that needs root, saying why; with
// -short every integration test is skipped.
func RequiresRoot(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("integration test: needs root (namespaces, mounts, containers)")
	}
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
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// BuildBinary builds a command of this module, static, into a temporary
// directory and returns its path. Go's build cache makes repeats cheap.
func BuildBinary(t testing.TB, pkg, name string) string {
	return buildFor(t, pkg, name, runtime.GOARCH)
}

func buildFor(t testing.TB, pkg, name, arch string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", out, "./"+pkg)
	cmd.Dir = ModuleRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
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
	arch := cmp.Or(v.Arch, image.HostArch)
	RequiresRoot(t)
	RequiresTool(t, "mmdebstrap", "mmdebstrap")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	img, err := image.Ensure(ctx, image.EnsureOptions{
		Root: StateRoot(), Recipe: image.RecipeOf(v), AgentBinary: BuildAgentFor(t, arch),
		Progress: func(line string) { t.Log("image:", line) },
	})
	if err != nil {
		t.Fatalf("guest image: %v", err)
	}
	return img
}

// Ledger is a run's ledger in a temporary directory, root, which must be
// empty when the test ends: whatever a test's guests recorded, they
// removed.
func Ledger(t testing.TB) (root string, led *ledger.Ledger) {
	t.Helper()
	root = t.TempDir()
	led, err := ledger.Create(root, "t")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p := led.Pending(); len(p) > 0 {
			t.Errorf("ledger still holds %d entries: %v", len(p), p)
		}
		led.Close()
	})
	return root, led
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
