package native

import (
	"context"
	"debug/elf"
	"errors"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/vfleet/vfleet/internal/tools"
)

// Every program builds for both architectures from the embedded source,
// statically, every library as a shared object, and the host's own build
// says which source it came from.
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
				bin := filepath.Join(rootfs, p.Path())
				f, err := elf.Open(bin)
				if err != nil {
					t.Fatal(err)
				}
				interp := f.Section(".interp")
				f.Close()
				if f.Machine != machine || interp != nil {
					t.Errorf("%s for %s: machine %v, dynamic %v", p.Name, arch, f.Machine, interp != nil)
				}
				if p.Library && f.Type != elf.ET_DYN {
					t.Errorf("%s for %s: ELF type %v, want a shared object", p.Name, arch, f.Type)
				}
				if arch != runtime.GOARCH {
					continue
				}
				if err := Identify(context.Background(), p, bin); err != nil {
					t.Error(err)
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
