package density

import (
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/testutil"
)

// spinEnv makes the test binary, run as a child, spin for spinFor and exit:
// a child whose CPU time is known from its rusage.
const (
	spinEnv = "DENSITY_TEST_SPIN"
	spinFor = 50 * time.Millisecond
)

func TestMain(m *testing.M) {
	if os.Getenv(spinEnv) != "" {
		spin(spinFor)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseSmapsRollup(t *testing.T) {
	areas, err := parseSmaps(readTestdata(t, "smaps_rollup-sleep"))
	want := Usage{RSS: 1764 << 10, PSS: 470 << 10, Shared: 1608 << 10, Private: 156 << 10}
	if err != nil || len(areas) != 1 || areas[0].Usage != want {
		t.Fatalf("got %+v, %v; want one area of %+v", areas, err, want)
	}
	for _, bad := range []string{"", "Rss: 12 kB\n", "Rss: 12 kB\nPss: 4 MB\n", "Rss: x kB\nPss: 4 kB\n",
		"7f00-7e00 rw-p 0 00:00 0\nRss: 4 kB\nPss: 4 kB\n", "7f00-8000 rw-p 0 00:00 0\nRss: 4 kB\n"} {
		if _, err := parseSmaps([]byte(bad)); !errors.Is(err, ErrFormat) {
			t.Errorf("%q: err %v, want ErrFormat", bad, err)
		}
	}
}

// A VM's guest RAM is the one mapping of its size: after a boot an
// anonymous one (TCG's translation cache, a page short of 1 GiB, is not
// it); in a clone the template's RAM file, mapped private, mostly shared
// page cache with a few pages of its own.
func TestGuestRAMRegion(t *testing.T) {
	for _, c := range []struct {
		file string
		want Usage
	}{
		{"smaps-qemu-boot", Usage{RSS: 135168 << 10, PSS: 135168 << 10, Private: 135168 << 10}},
		{"smaps-qemu-clone", Usage{RSS: 26776 << 10, PSS: 14061 << 10, Shared: 25200 << 10, Private: 1576 << 10}},
	} {
		areas, err := parseSmaps(readTestdata(t, c.file))
		if err != nil {
			t.Fatal(err)
		}
		if got := sizedLike(areas, 256<<20); got != c.want {
			t.Errorf("%s: guest RAM %+v, want %+v", c.file, got, c.want)
		}
	}
}

func TestParseChildren(t *testing.T) {
	got, err := parseChildren(readTestdata(t, "task-children"))
	if err != nil || !slices.Equal(got, []int{18523, 18524, 18526}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, err := parseChildren(nil); err != nil || len(got) != 0 {
		t.Fatalf("no children: %v, %v", got, err)
	}
	if _, err := parseChildren([]byte("12 x ")); !errors.Is(err, ErrFormat) {
		t.Fatalf("garbage: %v", err)
	}
}

// startSleep starts a child that lives until the test ends.
func startSleep(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd.Process.Pid
}

// exitedPid returns the pid of a process that has exited and been reaped.
func exitedPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func TestMemoryCountsDescendants(t *testing.T) {
	self, child := os.Getpid(), startSleep(t)
	tree := ProcessTree([]int{self})
	if len(tree) < 2 || tree[0] != self || !slices.Contains(tree, child) {
		t.Fatalf("tree of %d = %v, want it first and its child %d in it", self, tree, child)
	}
	if again := ProcessTree([]int{child, self, child}); len(again) != len(tree) || again[0] != child {
		t.Fatalf("a pid given twice or also a descendant must be counted once: %v", again)
	}
	whole, err := Memory([]int{self})
	if err != nil {
		t.Fatal(err)
	}
	alone, err := Memory([]int{child})
	if err != nil {
		t.Fatal(err)
	}
	if alone.Processes != 1 || alone.RSS <= 0 || alone.PSS <= 0 || alone.PSS > alone.RSS {
		t.Fatalf("sleep alone: %+v", alone)
	}
	if whole.Processes != len(tree) || whole.RSS <= alone.RSS || whole.PSS <= alone.PSS {
		t.Fatalf("test process and its child %+v, the child alone %+v", whole, alone)
	}
}

func TestExitedProcessesAreSkipped(t *testing.T) {
	dead := exitedPid(t)
	with, err := Memory([]int{dead, os.Getpid()})
	if err != nil || with.Processes == 0 {
		t.Fatalf("a live and an exited process: %+v, %v", with, err)
	}
	if _, err := CPUTime([]int{dead, os.Getpid()}); err != nil {
		t.Fatalf("a live and an exited process: %v", err)
	}
	if _, err := Memory([]int{dead}); !errors.Is(err, ErrNoProcess) {
		t.Fatalf("memory of an exited process: %v, want ErrNoProcess", err)
	}
	if _, err := CPUTime([]int{dead}); !errors.Is(err, ErrNoProcess) {
		t.Fatalf("cpu time of an exited process: %v, want ErrNoProcess", err)
	}
}

func TestCPUTimeGrowsWithWork(t *testing.T) {
	startSleep(t)
	self := []int{os.Getpid()}
	before, err := CPUTime(self)
	if err != nil {
		t.Fatal(err)
	}
	spin(spinFor)
	after, err := CPUTime(self)
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Fatalf("cpu time %v before a busy loop, %v after", before, after)
	}
}

// A reaped child's time must stay in the sum (as the parent's cutime and
// cstime), or a window's CPU would miss every short-lived process.
func TestCPUTimeKeepsReapedChildren(t *testing.T) {
	self := []int{os.Getpid()}
	before, err := CPUTime(self)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), spinEnv+"=1")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	after, err := CPUTime(self)
	if err != nil {
		t.Fatal(err)
	}
	childCPU := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	// Each of the four counters is truncated to whole ticks.
	if grew := after - before; grew < childCPU-4*time.Second/procfs.UserHZ {
		t.Fatalf("cpu time grew by %v while a reaped child used %v", grew, childCPU)
	}
}

func writeRandom(t *testing.T, path string, size int) {
	t.Helper()
	b := make([]byte, size)
	rand.Read(b)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	// Allocated blocks are final once written back.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	n, err := DiskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// slack is what a 1 MiB file may cost beyond its data: its filesystem's
// indirect or extent blocks.
const slack = 64 << 10

func TestDiskUsageCountsBlocksOncePerInode(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	empty := diskUsage(t, dir)
	writeRandom(t, filepath.Join(dir, "file"), 1<<20)
	withFile := diskUsage(t, dir)
	if grew := withFile - empty; grew < 1<<20 || grew > 1<<20+slack {
		t.Fatalf("a 1 MiB file added %d bytes", grew)
	}
	if err := os.Link(filepath.Join(dir, "file"), filepath.Join(dir, "sub", "link")); err != nil {
		t.Fatal(err)
	}
	if got := diskUsage(t, dir); got != withFile {
		t.Fatalf("a hard link changed the usage from %d to %d", withFile, got)
	}
	sparse, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer sparse.Close()
	if err := sparse.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	if got := diskUsage(t, dir); got-withFile > slack {
		t.Fatalf("a 1 GiB hole added %d bytes", got-withFile)
	}
	if _, err := DiskUsage(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing directory: %v", err)
	}
}

// Both kinds of mount a guest's state directory holds: a filesystem of its
// own (the overlay; here a tmpfs) and a bind mount of the same filesystem,
// which has the same device and can only be told by the kernel's flag.
func TestDiskUsageStaysOffMountPoints(t *testing.T) {
	testutil.RequiresRoot(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	dir, elsewhere := t.TempDir(), t.TempDir()
	writeRandom(t, filepath.Join(elsewhere, "file"), 1<<20)
	tmpfs, bind := filepath.Join(dir, "tmpfs"), filepath.Join(dir, "bind")
	for _, d := range []string{tmpfs, bind} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	empty := diskUsage(t, dir)
	if err := unix.Mount("tmpfs", tmpfs, "tmpfs", 0, "size=4m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(tmpfs, unix.MNT_DETACH)
	writeRandom(t, filepath.Join(tmpfs, "file"), 1<<20)
	if err := unix.Mount(elsewhere, bind, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(bind, unix.MNT_DETACH)
	if _, err := os.Stat(filepath.Join(bind, "file")); err != nil {
		t.Fatalf("bind mount not in place: %v", err)
	}
	// The mounts hide their mount points' own blocks, and would add a
	// whole 1 MiB file each if the walk crossed them.
	if got := diskUsage(t, dir); got > empty {
		t.Fatalf("usage %d with a tmpfs and a bind mount below, %d without: the walk crossed a mount point", got, empty)
	}
}
