package image

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"
)

// recipeFormat changes whenever the way a recipe becomes an image changes,
// so that old images are not mistaken for new ones.
const recipeFormat = 1

// Recipe says what goes into an image.
type Recipe struct {
	Format   int      `json:"format"`
	Suite    string   `json:"suite"`
	Variant  string   `json:"variant"`
	Packages []string `json:"packages"`
	// PathExcludes are dpkg path-exclude globs: documentation and
	// translations no workload reads, dropped to keep the image small.
	PathExcludes []string `json:"path_excludes"`
}

// DefaultRecipe is the image every built-in scenario uses.
func DefaultRecipe() Recipe {
	return Recipe{
		Format:  recipeFormat,
		Suite:   "bookworm",
		Variant: "essential",
		Packages: []string{
			"stress-ng", "sysbench", "fio", "iperf3", "sockperf", "rt-tests",
			"procps",
			// The guest kernel VM guests boot, and that `vfleet doctor` boots
			// to find out whether KVM really runs a guest.
			"linux-image-cloud-amd64",
		},
		PathExcludes: []string{"/usr/share/man/*", "/usr/share/doc/*", "/usr/share/locale/*", "/usr/share/info/*"},
	}
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

// mmdebstrapArgs builds the image builder's argv for a target directory.
func (r Recipe) mmdebstrapArgs(target string) []string {
	args := []string{"--variant=" + r.Variant, "--format=directory", "--include=" + strings.Join(r.Packages, ",")}
	for _, p := range r.PathExcludes {
		args = append(args, "--dpkgopt=path-exclude="+p)
	}
	return append(args, r.Suite, target)
}
