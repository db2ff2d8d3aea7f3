// Package native holds vfleet's own measuring programs, in C, where no
// packaged tool measures what a study needs (STREAM's four kernels; a
// context switch with both ends placed; CacheBench's three bandwidths by
// buffer size; an encoder's time over a fixed input it generates), and the start gate the agent
// preloads into tools that must start in many guests at one moment.
// Building an image compiles them for the image's architecture, programs
// statically into /usr/local/bin; the recipe carries their hash, so a
// changed source makes a new image.
package native

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/tools"
)

//go:embed src/*.c
var sources embed.FS

// Program is one of vfleet's own programs, or a library.
type Program struct {
	Name   string // as installed: in BinDir, or the library's full path
	Source string // file under src/
	Libs   []string
	// Library is a shared object to preload rather than a program: built
	// position-independent and linked to the image's own C library, since
	// it lives in the tool's process.
	Library bool
}

// Programs are every program and library an image carries.
var Programs = []Program{
	{Name: "vfleet-stream", Source: "stream.c", Libs: []string{"-pthread", "-lm"}},
	{Name: "vfleet-pingpong", Source: "pingpong.c"},
	{Name: "vfleet-cachebench", Source: "cachebench.c"},
	{Name: "vfleet-encode", Source: "encode.c"},
	{Name: agent.StartGatePath, Source: "start-gate.c", Library: true},
}

// cflags are the same for every architecture: optimised as STREAM asks
// (no flags that change its arithmetic). Programs are static, so they run
// in any image, a user's too.
var (
	cflags        = []string{"-O2", "-Wall", "-Werror"}
	programCflags = []string{"-static"}
	libraryCflags = []string{"-shared", "-fPIC"}
)

// BinDir is where an image has the programs.
const BinDir = "/usr/local/bin"

// Path is where an image has p.
func (p Program) Path() string {
	if p.Library {
		return p.Name
	}
	return filepath.Join(BinDir, p.Name)
}

func (p Program) flags() []string {
	kind := programCflags
	if p.Library {
		kind = libraryCflags
	}
	return append(append([]string{}, cflags...), kind...)
}

// SourceHash identifies a program's source; the program prints it for
// --version, so an image built from another source is told apart.
func SourceHash(p Program) string {
	b, err := sources.ReadFile("src/" + p.Source)
	if err != nil {
		panic(err) // embedded: present by construction
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Hash identifies every program's source and how it is built, for the
// image recipe.
func Hash() string {
	h := sha256.New()
	for _, p := range Programs {
		fmt.Fprintf(h, "%s %s %s %s\n", p.Name, SourceHash(p), strings.Join(p.Libs, " "), strings.Join(p.flags(), " "))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// triplets are the GNU names of the architectures' toolchains.
var triplets = map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}

// Compiler is the C compiler that builds programs for arch: the host's
// own for its architecture, a cross compiler for the other.
func Compiler(arch string) (tools.Tool, error) {
	triplet, ok := triplets[arch]
	if !ok {
		return tools.Tool{}, fmt.Errorf("no C toolchain known for architecture %q", arch)
	}
	return tools.Find(triplet + "-gcc")
}

// Build compiles every program and library for arch into rootfs.
func Build(ctx context.Context, arch, rootfs string) error {
	cc, err := Compiler(arch)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "vfleet-native-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	for _, p := range Programs {
		dst := filepath.Join(rootfs, p.Path())
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		b, err := sources.ReadFile("src/" + p.Source)
		if err != nil {
			return err
		}
		src := filepath.Join(work, p.Source)
		if err := os.WriteFile(src, b, 0o644); err != nil {
			return err
		}
		argv := append(p.flags(), fmt.Sprintf("-DSOURCE_SHA256=%q", SourceHash(p)), "-o", dst, src)
		argv = append(argv, p.Libs...)
		if out, err := exec.CommandContext(ctx, cc.Path, argv...).CombinedOutput(); err != nil {
			return fmt.Errorf("build %s for %s: %w: %s", filepath.Base(p.Name), arch, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// Identify says whether the file at path was built from p's source: a
// program is asked for --version, a library carries the same words.
func Identify(ctx context.Context, p Program, path string) error {
	var out []byte
	var err error
	if p.Library {
		out, err = os.ReadFile(path)
	} else {
		out, err = exec.CommandContext(ctx, path, "--version").Output()
	}
	if err != nil {
		return err
	}
	if !strings.Contains(string(out), "source "+SourceHash(p)) {
		return fmt.Errorf("%s was not built from this tree's %s", path, p.Source)
	}
	return nil
}
