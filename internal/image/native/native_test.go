package native

import (
	"context"
	"debug/elf"
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/tools"
)

// Every program builds for both architectures from the embedded source,
// statically, and the host's own build says which source it came from.
func TestProgramsBuildForEveryArchitecture(t *testing.T) {
	for arch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		t.Run(arch, func(t *testing.T) {
			if _, err := Compiler(arch); errors.Is(err, tools.ErrMissing) {
				t.Skipf("no C compiler for %s here: %v", arch, err)
			}
			rootfs := t.TempDir()
			if err := Build(context.Background(), arch, rootfs); err != nil {
				t.Fatal(err)
			}
			for _, p := range Programs {
				bin := filepath.Join(rootfs, BinDir, p.Name)
				f, err := elf.Open(bin)
				if err != nil {
					t.Fatal(err)
				}
				interp := f.Section(".interp")
				f.Close()
				if f.Machine != machine || interp != nil {
					t.Errorf("%s for %s: machine %v, dynamic %v", p.Name, arch, f.Machine, interp != nil)
				}
				if arch != runtime.GOARCH {
					continue
				}
				out, err := exec.Command(bin, "--version").Output()
				if err != nil || !strings.Contains(string(out), SourceHash(p)) {
					t.Errorf("%s --version = %q, %v; want its source %s", p.Name, out, err, SourceHash(p))
				}
			}
		})
	}
}

func TestHashFollowsTheSources(t *testing.T) {
	h := Hash()
	saved := Programs
	defer func() { Programs = saved }()
	Programs = append([]Program{}, saved...)
	Programs[0].Libs = append([]string{"-lrt"}, Programs[0].Libs...)
	if Hash() == h {
		t.Error("the hash ignores how a program is built")
	}
	if _, err := Compiler("sparc64"); err == nil {
		t.Error("a compiler for an unknown architecture")
	}
}
