package image

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
)

// readNewc is a minimal newc reader: it checks the writer's output the way
// the kernel's unpacker reads it (magic, hex fields, 4-byte padding).
func readNewc(t *testing.T, b []byte) map[string][3]uint64 {
	t.Helper()
	out := map[string][3]uint64{} // mode, size, rdevminor
	for off := 0; ; {
		if len(b[off:]) < 110 || string(b[off:off+6]) != "070701" {
			t.Fatalf("bad header at %d", off)
		}
		field := func(i int) uint64 {
			v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		mode, size, minor, namesize := field(1), field(6), field(10), field(11)
		name := string(b[off+110 : off+110+int(namesize)-1])
		off += (110 + int(namesize) + 3) &^ 3
		if name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after the trailer", len(b)-off)
			}
			return out
		}
		out[name] = [3]uint64{mode, size, minor}
		off += (int(size) + 3) &^ 3
	}
}

func TestCPIOWriterNewc(t *testing.T) {
	var buf bytes.Buffer
	w := NewCPIOWriter(&buf)
	w.Dir("/dev", 0o755)
	w.CharDev("dev/console", 0o600, 5, 1)
	w.File("/init", 0o755, []byte("hello"))
	w.File("empty", 0o644, nil)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got := readNewc(t, buf.Bytes())
	want := map[string][3]uint64{
		"dev": {0o040755, 0, 0}, "dev/console": {0o020600, 0, 1}, "init": {0o100755, 5, 0}, "empty": {0o100644, 0, 0},
	}
	if len(got) != len(want) {
		t.Fatalf("entries %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %o, want %o", k, got[k], v)
		}
	}
	if buf.Len()%4 != 0 {
		t.Errorf("archive length %d not padded", buf.Len())
	}
}

// testdata/modules-6.1.0-cloud holds lines of the Debian bookworm cloud
// kernel's modules.dep and modules.builtin.
func TestVMModulesLoadOrder(t *testing.T) {
	f, err := os.Open("testdata/modules-6.1.0-cloud/modules.dep")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	deps, err := ParseModulesDep(f)
	if err != nil {
		t.Fatal(err)
	}
	bf, err := os.Open("testdata/modules-6.1.0-cloud/modules.builtin")
	if err != nil {
		t.Fatal(err)
	}
	defer bf.Close()
	builtin, err := ParseModulesBuiltin(bf)
	if err != nil {
		t.Fatal(err)
	}
	order, err := deps.LoadOrder(append([]string{"ext4"}, VMModules("amd64")...), builtin)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, p := range order {
		pos[moduleName(p)] = i
	}
	if _, ok := pos["ext4"]; ok {
		t.Error("built-in ext4 listed for loading")
	}
	for _, m := range VMModules("amd64") {
		if _, ok := pos[m]; !ok {
			t.Errorf("%s missing from %v", m, order)
		}
	}
	for _, before := range [][2]string{{"virtio_ring", "virtio"}, {"virtio", "virtio_pci"}, {"virtio_pci_modern_dev", "virtio_pci"}, {"virtio", "virtio_blk"}, {"virtio", "virtio_console"}, {"failover", "net_failover"}, {"net_failover", "virtio_net"}, {"virtio", "virtio_net"}} {
		if pos[before[0]] >= pos[before[1]] {
			t.Errorf("%s loads after %s: %v", before[0], before[1], order)
		}
	}
	if strings.Count(strings.Join(order, " "), "virtio_ring") != 1 {
		t.Errorf("a module listed twice: %v", order)
	}
	if _, err := deps.LoadOrder([]string{"no_such_mod"}, builtin); err == nil {
		t.Error("unknown module accepted")
	}
	if _, err := ParseModulesDep(strings.NewReader("no colon here\n")); err == nil {
		t.Error("malformed modules.dep accepted")
	}
}

func TestMkfsArgsFillFromRootFS(t *testing.T) {
	got := strings.Join(MkfsArgs("/img/rootfs", "/tmp/x.raw"), " ")
	if !strings.Contains(got, "-d /img/rootfs") || !strings.HasSuffix(got, "/tmp/x.raw") {
		t.Fatalf("mkfs args: %s", got)
	}
}
