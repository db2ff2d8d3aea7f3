package fastpath

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/vfleet/vfleet/internal/testutil"
)

// bpf2goDirectives returns the argv of every bpf2go line in gen.go, so
// that the test compiles exactly as go generate does.
func bpf2goDirectives(t *testing.T) [][]string {
	t.Helper()
	src, err := os.ReadFile("gen.go")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "//go:generate ")
		if !ok || !strings.Contains(line, "cmd/bpf2go") {
			continue
		}
		if strings.ContainsAny(line, `"'`) {
			t.Fatalf("gen.go: quoted bpf2go arguments are not understood here: %s", line)
		}
		out = append(out, strings.Fields(line))
	}
	if len(out) != 2 {
		t.Fatalf("gen.go has %d bpf2go directives, want 2 (xdp and tc)", len(out))
	}
	return out
}

// clangMajor extracts the major version from `clang --version`'s first line.
func clangMajor(line string) string {
	m := regexp.MustCompile(`clang version (\d+)\.`).FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	return m[1]
}

func TestClangMajor(t *testing.T) {
	for line, want := range map[string]string{
		"Debian clang version 14.0.6":                   "14",
		"clang version 18.1.8 (Fedora 18.1.8-1.fc40)":   "18",
		"Ubuntu clang version 16.0.6 (15)":              "16",
		"gcc (Debian 12.2.0-14+deb12u1) 12.2.0":         "",
		"Apple clang version 15.0.0 (clang-1500.3.9.4)": "15",
	} {
		if got := clangMajor(line); got != want {
			t.Errorf("clangMajor(%q) = %q, want %q", line, got, want)
		}
	}
}

// TestObjectsMatchSources recompiles the C sources and fails if the
// committed objects differ. Byte equality is the rule with the clang that
// built them; with another clang of the same major version the programs'
// instructions and maps are compared instead. Another major version would
// report the compiler, not the sources, so the test says so and skips.
func TestObjectsMatchSources(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles C: skipped with -short")
	}
	testutil.RequiresTool(t, "clang", "clang")
	testutil.RequiresTool(t, "llvm-strip", "llvm")
	if _, err := os.Stat("/usr/include/bpf/bpf_helpers.h"); err != nil {
		t.Skip("bpf/bpf_helpers.h not installed (Debian package libbpf-dev)")
	}
	recorded, err := os.ReadFile("bpf/clang-version")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("clang", "--version").Output()
	if err != nil {
		t.Fatalf("clang --version: %v", err)
	}
	local := strings.SplitN(string(out), "\n", 2)[0]
	builtWith := strings.TrimSpace(string(recorded))
	if clangMajor(local) != clangMajor(builtWith) {
		t.Skipf("the objects were built with %q, this host has %q: regenerate with that clang to compare", builtWith, local)
	}

	dir := t.TempDir()
	for _, argv := range bpf2goDirectives(t) {
		// argv is "go run <pkg> [flags] <ident> <source>"; the output
		// directory goes with the flags.
		args := append([]string{}, argv[1:3]...)
		args = append(args, "-output-dir", dir)
		args = append(args, argv[3:]...)
		cmd := exec.Command("go", args...)
		cmd.Env = append(os.Environ(), "GOPACKAGE=fastpath", "GOFILE=gen.go")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, b)
		}
	}
	fresh, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(fresh) != 8 {
		t.Fatalf("bpf2go made %d files, want 8: %v", len(fresh), fresh)
	}
	for _, path := range fresh {
		name := filepath.Base(path)
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s is not committed: %v; run go generate", name, err)
			continue
		}
		if bytes.Equal(got, want) {
			continue
		}
		if !strings.HasSuffix(name, ".o") || local == builtWith {
			t.Errorf("%s differs from what the sources compile to; run go generate", name)
			continue
		}
		if diff := specDiff(t, name, path); diff != "" {
			t.Errorf("%s differs from what the sources compile to (%s); run go generate", name, diff)
		}
	}
}

// specDiff compares the programs and maps of two objects and describes the
// first difference, or returns "".
func specDiff(t *testing.T, committed, fresh string) string {
	t.Helper()
	a, err := ebpf.LoadCollectionSpec(committed)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ebpf.LoadCollectionSpec(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if ka, kb := keys(a.Programs), keys(b.Programs); ka != kb {
		return fmt.Sprintf("programs %s, sources have %s", ka, kb)
	}
	if ka, kb := keys(a.Maps), keys(b.Maps); ka != kb {
		return fmt.Sprintf("maps %s, sources have %s", ka, kb)
	}
	for name, pa := range a.Programs {
		pb := b.Programs[name]
		ia, ib := fmt.Sprintf("%v", pa.Instructions), fmt.Sprintf("%v", pb.Instructions)
		if pa.Type != pb.Type || pa.SectionName != pb.SectionName || pa.License != pb.License || ia != ib {
			return "program " + name
		}
	}
	for name, ma := range a.Maps {
		mb := b.Maps[name]
		if ma.Type != mb.Type || ma.KeySize != mb.KeySize || ma.ValueSize != mb.ValueSize ||
			ma.MaxEntries != mb.MaxEntries || ma.Flags != mb.Flags {
			return "map " + name
		}
	}
	return ""
}

func keys[V any](m map[string]V) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}
