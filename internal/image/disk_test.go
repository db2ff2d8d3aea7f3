package image

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/regfile"
)

// The recordings are `qemu-img info -U --output=json` of QEMU 7.2: a
// qcow2, a raw disk, a qcow2 overlay, a vmdk and a text file (which QEMU
// takes for a raw disk of 512 bytes).
func TestParseDiskInfo(t *testing.T) {
	for _, c := range []struct {
		file, format, err string
		size              int64
	}{
		{file: "a.qcow2.json", format: "qcow2", size: 1 << 30},
		{file: "b.raw.json", format: "raw", size: 64 << 20},
		{file: "o.qcow2.json", format: "qcow2", size: 1 << 30},
		{file: "c.vmdk.json", err: `format "vmdk" is not supported (known: qcow2, raw; convert it with qemu-img convert -O qcow2)`},
		{file: "text-file.json", err: "512 bytes: too small to hold a root file system"},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "qemu-img-info", c.file))
		if err != nil {
			t.Fatal(err)
		}
		d, err := ParseDiskInfo(b)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.file, err, c.err)
			}
			continue
		}
		if err != nil || d.Format != c.format || d.VirtualSize != c.size {
			t.Errorf("%s: %+v, %v; want %s of %d bytes", c.file, d, err, c.format, c.size)
		}
	}
	if _, err := ParseDiskInfo([]byte("qemu-img: not json")); err == nil {
		t.Error("output that is not JSON accepted")
	}
}

// The user's initrd comes first, unchanged; the agent's archive follows
// at a 512-byte boundary, with the agent where the kernel is told to run
// it and nothing else the user's archive could hold.
func TestWriteBesideInitramfs(t *testing.T) {
	dir := t.TempDir()
	agentBin, userInitrd := filepath.Join(dir, "agent"), filepath.Join(dir, "initrd")
	agentBytes, userBytes := []byte("\x7fELF the agent"), bytes.Repeat([]byte("u"), 1000)
	if err := os.WriteFile(agentBin, agentBytes, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(userInitrd, userBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		initrd string
		prefix []byte
		dev    bool
	}{{userInitrd, userBytes, false}, {"", nil, true}} {
		out := filepath.Join(dir, "out")
		if err := WriteBesideInitramfs(out, agentBin, c.initrd, "/vfleet/init"); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, c.prefix) {
			t.Fatalf("initrd %q: the user's archive is not first, unchanged", c.initrd)
		}
		start := (len(c.prefix) + 511) &^ 511
		if !bytes.Equal(b[len(c.prefix):start], make([]byte, start-len(c.prefix))) || !bytes.HasPrefix(b[start:], []byte("070701")) {
			t.Fatalf("initrd %q: the agent's archive does not start at %d after zeros", c.initrd, start)
		}
		ours := string(b[start:])
		for _, want := range []string{"vfleet\x00", "vfleet/init\x00", string(agentBytes), "TRAILER!!!"} {
			if !strings.Contains(ours, want) {
				t.Errorf("initrd %q: the agent's archive lacks %q", c.initrd, want)
			}
		}
		// Only an initramfs of vfleet's alone needs the console node the
		// kernel opens for the first program; a user's has its own.
		if got := strings.Contains(ours, "dev/console\x00"); got != c.dev {
			t.Errorf("initrd %q: dev/console in vfleet's archive = %v", c.initrd, got)
		}
	}
	if err := WriteBesideInitramfs(filepath.Join(dir, "x"), agentBin, filepath.Join(dir, "missing"), "/vfleet/init"); err == nil {
		t.Error("a missing initrd accepted")
	}
	// A copy from a device would only end when the disk is full.
	for _, initrd := range []string{"/dev/zero", dir} {
		if err := WriteBesideInitramfs(filepath.Join(dir, "x"), agentBin, initrd, "/vfleet/init"); !errors.Is(err, regfile.ErrNotRegular) {
			t.Errorf("initrd %s: err = %v, want regfile.ErrNotRegular", initrd, err)
		}
	}
}

// The backing chain is read from the qcow2 headers qemu-img writes: a
// relative name from the directory of the disk naming it, an absolute one
// as it is, and a raw disk ends the chain.
func TestBackingChain(t *testing.T) {
	qemuImg, err := exec.LookPath("qemu-img")
	if err != nil {
		t.Skip("qemu-img not installed (Debian package qemu-utils)")
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	base, mid, top := filepath.Join(dir, "sub", "base.raw"), filepath.Join(dir, "sub", "mid.qcow2"), filepath.Join(dir, "top.qcow2")
	for _, argv := range [][]string{
		{"create", "-q", "-f", "raw", base, "1M"},
		{"create", "-q", "-f", "qcow2", "-F", "raw", "-b", "base.raw", mid},
		{"create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", mid, top},
	} {
		if out, err := exec.Command(qemuImg, argv...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img %v: %v: %s", argv, err, out)
		}
	}
	chain, err := BackingChain(top)
	if err != nil || !slices.Equal(chain, []string{mid, base}) {
		t.Errorf("BackingChain(top) = %v, %v, want [%s %s]", chain, err, mid, base)
	}
	if chain, err := BackingChain(base); err != nil || len(chain) != 0 {
		t.Errorf("BackingChain(raw) = %v, %v", chain, err)
	}
	// A disk backed by itself is a loop, not a hang.
	loop := filepath.Join(dir, "loop.qcow2")
	if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", "-u", "-F", "qcow2", "-b", "loop.qcow2", loop, "1M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v: %s", err, out)
	}
	if _, err := BackingChain(loop); !errors.Is(err, ErrBadDisk) {
		t.Errorf("a loop: %v", err)
	}
}

// Guests of one agent and one initrd share one initramfs, made once;
// another agent, another initrd's contents or none get their own.
func TestBesideInitramfsIsSharedPerAgentAndInitrd(t *testing.T) {
	dir, shared := t.TempDir(), filepath.Join(t.TempDir(), "beside")
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	agent, other := write("agent", []byte("\x7fELF one")), write("agent2", []byte("\x7fELF two"))
	initrd := write("initrd", bytes.Repeat([]byte("u"), 1000))
	if err := os.Chmod(initrd, 0o644); err != nil {
		t.Fatal(err)
	}
	ensure := func(agent, initrd string) string {
		t.Helper()
		p, err := EnsureBesideInitramfs(shared, agent, initrd, "/vfleet/init")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := ensure(agent, initrd)
	if again := ensure(agent, initrd); again != first {
		t.Fatalf("the same agent and initrd made %s, then %s", first, again)
	}
	want := filepath.Join(dir, "want")
	if err := WriteBesideInitramfs(want, agent, initrd, "/vfleet/init"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(first)
	if w, _ := os.ReadFile(want); !bytes.Equal(got, w) {
		t.Fatal("the shared initramfs is not the user's initrd with the agent appended")
	}
	if st, err := os.Stat(first); err != nil || st.Mode().Perm()&0o004 == 0 {
		t.Fatalf("shared initramfs not readable by a sandboxed QEMU: %v %v", st.Mode(), err)
	}
	seen := map[string]string{first: "first"}
	for what, p := range map[string]string{"another agent": ensure(other, initrd), "no initrd": ensure(agent, "")} {
		if by, ok := seen[p]; ok {
			t.Errorf("%s got the initramfs of %s", what, by)
		}
		seen[p] = what
	}
	write("initrd", bytes.Repeat([]byte("v"), 1024)) // the user rebuilt it
	if p := ensure(agent, initrd); seen[p] != "" {
		t.Errorf("a changed initrd got the initramfs of %s", seen[p])
	}
	// An initrd others may not read keeps its copy from them too.
	private := write("private", bytes.Repeat([]byte("s"), 1000))
	if st, err := os.Stat(ensure(agent, private)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the copy of an initrd others cannot read: %v %v, want -rw-------", st.Mode(), err)
	}
	entries, _ := os.ReadDir(shared)
	if len(entries) != 5 {
		t.Errorf("shared directory holds %d files, want the 5 initramfs made", len(entries))
	}
}
