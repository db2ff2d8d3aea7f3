package metrics

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func recorded(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParsersOnRecordedFiles(t *testing.T) {
	for _, tc := range []struct {
		file  string
		parse func([]byte) (float64, error)
		want  float64
	}{
		{"cgroup-v1/memory.usage_in_bytes", ParseBytes, 52690944},
		{"cgroup-v2/memory.current", ParseBytes, 52690944},
		{"proc/python.stat", ParseProcStat, 0.87},
		{"proc/odd-comm.stat", ParseProcStat, 0},
		{"proc/python.status", ParseProcStatusRSS, 14088 * 1024},
		{"proc/odd-comm.status", ParseProcStatusRSS, 1728 * 1024},
	} {
		got, err := tc.parse(recorded(t, tc.file))
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if diff := got - tc.want; diff > 1e-9 || diff < -1e-9 {
			t.Errorf("%s: got %v, want %v", tc.file, got, tc.want)
		}
	}
}

func TestOddCommandNameDoesNotShiftFields(t *testing.T) {
	// Field 14 counted naively from the start would land inside the name.
	b := []byte("8010 (x) 1 2 3) S 1 8005 26560 0 -1 4194304 134 0 0 0 7 5 3 1 20 0 1 0 230288\n")
	got, err := ParseProcStat(b)
	if err != nil || got != 0.16 {
		t.Fatalf("got %v, %v; want 0.16", got, err)
	}
}

func TestNetDevLeavesOutLoopback(t *testing.T) {
	got, err := ParseNetDev(recorded(t, "proc/net-dev"))
	if err != nil {
		t.Fatal(err)
	}
	want := []NetDev{
		{Interface: "ifb0"},
		{Interface: "ifb1"},
		{Interface: "eth0", RxBytes: 420292920, RxPackets: 13774, TxBytes: 875753, TxPackets: 9396},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestMalformedFilesAreFormatErrors(t *testing.T) {
	for name, f := range map[string]func() error{
		"bytes negative":  func() error { _, err := ParseBytes([]byte("-1")); return err },
		"stat no name":    func() error { _, err := ParseProcStat([]byte("1 S 2 3")); return err },
		"stat short":      func() error { _, err := ParseProcStat([]byte("1 (a) S 1 2 3")); return err },
		"stat text time":  func() error { _, err := ParseProcStat([]byte("1 (a) S 1 1 1 0 -1 0 0 0 0 0 x 0 0 0 20")); return err },
		"rss unit":        func() error { _, err := ParseProcStatusRSS([]byte("VmRSS:\t12 MB\n")); return err },
		"net/dev short":   func() error { _, err := ParseNetDev([]byte("h\nh\n eth0: 1 2 3\n")); return err },
		"net/dev no name": func() error { _, err := ParseNetDev([]byte("h\nh\n eth0 1 2 3\n")); return err },
	} {
		if err := f(); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: got %v, want ErrFormat", name, err)
		}
	}
}

// fakeRoot lays the recorded files out as a live system has them: a v1
// container cgroup, a v2 one, a baseline process sharing the host's
// network namespace and one in a namespace of its own.
func fakeRoot(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	put := func(rel, file string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, recorded(t, file), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(rel, target string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	put("sys/fs/cgroup/cpuacct/vfleet/r7-abcdef/c-0/cpuacct.usage", "cgroup-v1/cpuacct.usage")
	put("sys/fs/cgroup/memory/vfleet/r7-abcdef/c-0/memory.usage_in_bytes", "cgroup-v1/memory.usage_in_bytes")
	put("sys/fs/cgroup/vfleet/r7-abcdef/c-1/cpu.stat", "cgroup-v2/cpu.stat")
	put("sys/fs/cgroup/vfleet/r7-abcdef/c-1/memory.current", "cgroup-v2/memory.current")
	put("sys/fs/cgroup/vfleet/r7-abcdef/c-2/cpu.stat", "cgroup-v2/cpu.stat")
	link("proc/self/ns/net", "net:[4026531840]")
	put("proc/4242/stat", "proc/python.stat")
	put("proc/4242/status", "proc/python.status")
	put("proc/4242/io", "proc/dd.io")
	put("proc/9/io", "proc/dd.io")
	link("proc/4242/ns/net", "net:[4026531840]")
	put("proc/4343/stat", "proc/odd-comm.stat")
	put("proc/4343/status", "proc/odd-comm.status")
	put("proc/4343/io", "proc/dd.io")
	put("proc/4343/net/dev", "proc/net-dev")
	link("proc/4343/ns/net", "net:[4026532999]")
	return root
}

func TestSourcesResolveEveryLayout(t *testing.T) {
	root := fakeRoot(t)
	for _, tc := range []struct {
		name   string
		cgroup string
		pids   []int
		want   Usage
	}{
		{"cgroup v1", "/vfleet/r7-abcdef/c-0", []int{9}, Usage{CPUSeconds: 0.280115349, MemoryBytes: 52690944, HasCPU: true, HasMemory: true,
			ReadBytes: 8388608, WriteBytes: 8413184, HasIO: true}},
		{"cgroup v2", "vfleet/r7-abcdef/c-1", nil, Usage{CPUSeconds: 0.280439, MemoryBytes: 52690944, HasCPU: true, HasMemory: true}},
		{"cgroup v2 without the memory controller", "vfleet/r7-abcdef/c-2", []int{4242}, Usage{CPUSeconds: 0.280439, HasCPU: true,
			ReadBytes: 8388608, WriteBytes: 8413184, HasIO: true}},
		{"process in the host's netns", "", []int{4242}, Usage{CPUSeconds: 0.87, MemoryBytes: 14088 * 1024, HasCPU: true, HasMemory: true,
			ReadBytes: 8388608, WriteBytes: 8413184, HasIO: true}},
		{"two processes, own netns", "", []int{4343, 4242}, Usage{CPUSeconds: 0.87, MemoryBytes: (14088 + 1728) * 1024, HasCPU: true, HasMemory: true,
			ReadBytes: 2 * 8388608, WriteBytes: 2 * 8413184, HasIO: true, Net: []NetDev{{Interface: "ifb0"}, {Interface: "ifb1"}, {Interface: "eth0", RxBytes: 420292920, RxPackets: 13774, TxBytes: 875753, TxPackets: 9396}}}},
	} {
		got, err := resolveSource(root, tc.cgroup, tc.pids).read()
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

func TestVanishedGuestIsAnErrorNotZero(t *testing.T) {
	root := fakeRoot(t)
	src := resolveSource(root, "/vfleet/r7-abcdef/c-0", nil)
	if err := os.RemoveAll(filepath.Join(root, "sys")); err != nil {
		t.Fatal(err)
	}
	if _, err := src.read(); err == nil {
		t.Fatal("read of a removed cgroup succeeded")
	}
	if _, err := resolveSource(root, "", nil).read(); err == nil {
		t.Fatal("a guest with nothing to read gave no error")
	}
	if _, err := resolveSource(root, "", []int{999999}).read(); err == nil {
		t.Fatal("a gone process gave no error")
	}
}

func TestKernelThreadHasNoResidentSet(t *testing.T) {
	got, err := ParseProcStatusRSS([]byte("Name:\tkthreadd\nState:\tS (sleeping)\nPid:\t2\n"))
	if err != nil || got != 0 {
		t.Fatalf("got %v, %v; want 0, nil", got, err)
	}
}

func TestParseProcIO(t *testing.T) {
	r, w, err := ParseProcIO(recorded(t, "proc/dd.io"))
	// dd wrote and read back 8 MiB with O_DIRECT; the write adds a little
	// file-system metadata.
	if err != nil || r != 8388608 || w != 8413184 {
		t.Fatalf("ParseProcIO = %v, %v, %v", r, w, err)
	}
	for _, bad := range []string{"", "rchar: 1\nwchar: 2\n", "read_bytes: x\nwrite_bytes: 1\n"} {
		if _, _, err := ParseProcIO([]byte(bad)); !errors.Is(err, ErrFormat) {
			t.Errorf("ParseProcIO(%q) = %v, want ErrFormat", bad, err)
		}
	}
}
