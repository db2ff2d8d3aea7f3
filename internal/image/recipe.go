package image

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"strings"

	"github.com/vfleet/vfleet/internal/image/native"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// recipeFormat changes whenever the way a recipe becomes an image changes,
// so that old images are not mistaken for new ones.
const recipeFormat = 1

// Recipe says what goes into an image.
type Recipe struct {
	Format  int    `json:"format"`
	Suite   string `json:"suite"`
	Variant string `json:"variant"`
	// Arch is the image's Debian architecture when it is not the host's;
	// empty for the host's. Left out of the hash when empty, so that the
	// host's images keep theirs.
	Arch     string   `json:"arch,omitempty"`
	Packages []string `json:"packages"`
	// PathExcludes are dpkg path-exclude globs: documentation and
	// translations no workload reads, dropped to keep the image small.
	PathExcludes []string `json:"path_excludes"`
	// Programs is the hash of vfleet's own programs (package native),
	// compiled into the image for its architecture; empty for none.
	Programs string `json:"programs,omitempty"`
	// NoInitrd keeps the kernel's package from making an initrd: vfleet's
	// VMs boot with an initramfs of its own (EnsureVMBoot), so Debian's is
	// never read, and making it is most of the kernel's install time.
	NoInitrd bool `json:"no_initrd,omitempty"`
}

// DefaultRecipe is the image every built-in scenario uses, for this
// host's architecture.
func DefaultRecipe() Recipe { return RecipeFor(HostArch) }

// RecipeFor is vfleet's image for a Debian architecture (one of
// guest.Arches), with the default guest kernel.
func RecipeFor(arch string) Recipe { return RecipeOf(Variant{Arch: arch}) }

// Variant is one of vfleet's images: an architecture and the flavour of
// the kernel VM guests boot (guest.KernelFlavours), each empty for the
// default. Containers and the host use the default's root file system.
type Variant struct {
	Arch, KernelFlavour string
}

// Default says whether v is the image of this host's architecture with
// the default kernel, the one every run prepares.
func (v Variant) Default() bool {
	return (v.Arch == "" || v.Arch == HostArch) && (v.KernelFlavour == "" || v.KernelFlavour == defaultKernelFlavour)
}

func (v Variant) String() string {
	return cmp.Or(v.Arch, HostArch) + " " + cmp.Or(v.KernelFlavour, defaultKernelFlavour) + " kernel"
}

// defaultKernelFlavour is guest.KernelCloud, which this package does not
// import.
const defaultKernelFlavour = "cloud"

// RecipeOf is the recipe of one of vfleet's images.
func RecipeOf(v Variant) Recipe {
	arch := cmp.Or(v.Arch, HostArch)
	r := Recipe{
		Format:  recipeFormat,
		Suite:   "bookworm",
		Variant: "essential",
		// The workloads' programs, and the packages the image needs itself.
		Packages: append(programs.Packages(),
			"procps",
			// The guest kernel VM guests boot, and that `vfleet doctor` boots
			// to find out whether KVM really runs a guest.
			"linux-image-"+cmp.Or(v.KernelFlavour, defaultKernelFlavour)+"-"+arch,
		),
		PathExcludes: []string{"/usr/share/man/*", "/usr/share/doc/*", "/usr/share/locale/*", "/usr/share/info/*"},
		Programs:     native.Hash(),
		NoInitrd:     true,
	}
	if arch != HostArch {
		r.Arch = arch
	}
	return r
}

// HostArch is this host's Debian architecture; for the architectures
// vfleet knows, Debian's name is Go's.
const HostArch = runtime.GOARCH

// ArchOf is the Debian architecture of the recipe's image.
func (r Recipe) ArchOf() string {
	if r.Arch == "" {
		return HostArch
	}
	return r.Arch
}

// Hash identifies the recipe: a hex sha256 of its canonical JSON, with the
// package list sorted so that order does not matter.
func (r Recipe) Hash() string {
	c := r
	c.Packages = sortedCopy(r.Packages)
	c.PathExcludes = sortedCopy(r.PathExcludes)
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// String names the recipe's image for people: its architecture, suite and
// the start of its hash, e.g. "arm64 bookworm image 1a2b3c4d5e6f".
func (r Recipe) String() string {
	h := r.Hash()
	return fmt.Sprintf("%s %s image %s", r.ArchOf(), r.Suite, h[:12])
}

// mmdebstrapArgs builds the image builder's argv for a target directory.
func (r Recipe) mmdebstrapArgs(target string) []string {
	args := []string{"--variant=" + r.Variant, "--format=directory", "--include=" + strings.Join(r.Packages, ",")}
	if r.Arch != "" {
		args = append(args, "--architectures="+r.Arch)
	}
	for _, p := range r.PathExcludes {
		args = append(args, "--dpkgopt=path-exclude="+p)
	}
	return append(args, r.Suite, target)
}
