// Package native holds vfleet's own measuring programs, in C, where no
// packaged tool measures what a study needs (STREAM's four kernels; a
// context switch with both ends placed). Building an image compiles them,
// statically, for the image's architecture, into /usr/local/bin; the
// recipe carries their hash, so a changed source makes a new image.
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

	"github.com/vfleet/vfleet/internal/tools"
)

//go:embed src/*.c
var sources embed.FS

// Program is one of vfleet's own programs.
type Program struct {
	Name   string // as installed, in /usr/local/bin
	Source string // file under src/
	Libs   []string
}

// Programs are every program an image carries.
var Programs = []Program{
	{Name: "vfleet-stream", Source: "stream.c", Libs: []string{"-pthread", "-lm"}},
	{Name: "vfleet-pingpong", Source: "pingpong.c"},
}

// cflags are the same for every architecture: optimised as STREAM asks
// (no flags that change its arithmetic), and static, so the program runs
// in any image, a user's too.
var cflags = []string{"-O2", "-static", "-Wall", "-Werror"}

// BinDir is where an image has the programs.
const BinDir = "/usr/local/bin"

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
		fmt.Fprintf(h, "%s %s %s %s\n", p.Name, SourceHash(p), strings.Join(p.Libs, " "), strings.Join(cflags, " "))
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

// Build compiles every program for arch into rootfs's BinDir.
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
	dst := filepath.Join(rootfs, BinDir)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, p := range Programs {
		b, err := sources.ReadFile("src/" + p.Source)
		if err != nil {
			return err
		}
		src := filepath.Join(work, p.Source)
		if err := os.WriteFile(src, b, 0o644); err != nil {
			return err
		}
		argv := append(append([]string{}, cflags...), fmt.Sprintf("-DSOURCE_SHA256=%q", SourceHash(p)), "-o", filepath.Join(dst, p.Name), src)
		argv = append(argv, p.Libs...)
		if out, err := exec.CommandContext(ctx, cc.Path, argv...).CombinedOutput(); err != nil {
			return fmt.Errorf("build %s for %s: %w: %s", p.Name, arch, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
