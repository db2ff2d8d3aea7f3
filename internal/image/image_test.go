package image

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/image/native"
	"github.com/vfleet/vfleet/internal/workload"
)

func TestRecipeHashIsStableAndSensitive(t *testing.T) {
	r := DefaultRecipe()
	if r.Hash() != DefaultRecipe().Hash() {
		t.Fatal("hash not deterministic")
	}
	shuffled := DefaultRecipe()
	shuffled.Packages[0], shuffled.Packages[1] = shuffled.Packages[1], shuffled.Packages[0]
	if shuffled.Hash() != r.Hash() {
		t.Fatal("package order must not change the hash")
	}
	for name, change := range map[string]func(*Recipe){
		"suite":   func(r *Recipe) { r.Suite = "trixie" },
		"package": func(r *Recipe) { r.Packages = append(r.Packages, "netperf") },
		"format":  func(r *Recipe) { r.Format++ },
		"variant": func(r *Recipe) { r.Variant = "apt" },
		"initrd":  func(r *Recipe) { r.NoInitrd = !r.NoInitrd },
	} {
		c := DefaultRecipe()
		change(&c)
		if c.Hash() == r.Hash() {
			t.Errorf("changing the %s does not change the hash", name)
		}
	}
}

// Every registered workload's programs are in every variant of vfleet's
// image: its Debian packages installed, or, for vfleet's own, built in;
// beside them, only the image's own packages.
func TestRecipeCarriesEveryWorkloadsPrograms(t *testing.T) {
	own := map[string]bool{}
	for _, p := range native.Programs {
		own[p.Name] = true
	}
	for _, v := range []Variant{{}, {Arch: "arm64"}, {Arch: "amd64", KernelFlavour: "rt"}} {
		r := RecipeOf(v)
		rest := map[string]bool{}
		for _, p := range r.Packages {
			rest[p] = true
		}
		for _, name := range workload.Names() {
			w, _ := workload.Lookup(name)
			for _, p := range w.Programs() {
				if p.Package == "" && (!own[p.Name] || r.Programs == "") || p.Package != "" && !slices.Contains(r.Packages, p.Package) {
					t.Errorf("%v lacks workload %s's %s (package %q)", v, name, p.Name, p.Package)
				}
				delete(rest, p.Package)
			}
		}
		delete(rest, "procps")
		delete(rest, "linux-image-"+cmp.Or(v.KernelFlavour, "cloud")+"-"+cmp.Or(v.Arch, HostArch))
		if len(rest) > 0 {
			t.Errorf("%v installs %v, which no workload runs", v, rest)
		}
	}
}

func TestMmdebstrapArgs(t *testing.T) {
	r := Recipe{Suite: "bookworm", Variant: "essential", Packages: []string{"fio", "sysbench"}, PathExcludes: []string{"/usr/share/doc/*"}}
	want := []string{"--variant=essential", "--format=directory", "--include=fio,sysbench", "--dpkgopt=path-exclude=/usr/share/doc/*", "bookworm", "/t/rootfs"}
	if got := r.mmdebstrapArgs("/t/rootfs"); !reflect.DeepEqual(got, want) {
		t.Fatalf("argv:\n got %q\nwant %q", got, want)
	}
}

func TestParseDpkgStatusRecorded(t *testing.T) {
	f, err := os.Open("testdata/dpkg-status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ParseDpkgStatus(f)
	if err != nil {
		t.Fatal(err)
	}
	for pkg, want := range map[string]string{"fio": "3.33-3", "sysbench": "1.0.20+ds-5", "stress-ng": "0.15.06-2"} {
		if got[pkg] != want {
			t.Errorf("%s = %q, want %q", pkg, got[pkg], want)
		}
	}
	if _, ok := got["removed-pkg"]; ok {
		t.Error("a package that is not installed must not be listed")
	}
}

func TestParseDpkgStatusRejectsGarbage(t *testing.T) {
	if _, err := ParseDpkgStatus(strings.NewReader("Package fio\n")); err == nil {
		t.Fatal("malformed line accepted")
	}
}

func TestMountPointsBelowDeepestFirst(t *testing.T) {
	got, err := mountPointsBelow("testdata/proc", "/b/.build-1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "/b/.build-1/rootfs/dev/pts /b/.build-1/rootfs/proc /b/.build-1/rootfs/dev" {
		t.Fatalf("got %q", got)
	}
}

// Each image has its own lock: a build of one (here its lock held) does
// not hold up Ensure of another, built already, and Ensure of the one
// being built says at once whose build it waits for.
func TestImageLockIsPerRecipe(t *testing.T) {
	root := t.TempDir()
	building, built := RecipeFor("arm64"), RecipeFor("amd64")
	dir := filepath.Join(imagesDir(root), built.Hash())
	if err := os.MkdirAll(filepath.Join(dir, "rootfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeManifest(dir, Manifest{Recipe: built, Hash: built.Hash()}); err != nil {
		t.Fatal(err)
	}
	unlock, err := lockBuild(context.Background(), filepath.Join(imagesDir(root), building.Hash()), "building the "+building.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := Ensure(ctx, EnsureOptions{Root: root, Recipe: built}); err != nil {
		t.Fatalf("another image's build held up a built one: %v", err)
	}
	var said []string
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	_, err = Ensure(ctx, EnsureOptions{Root: root, Recipe: building, Progress: func(line string) {
		said = append(said, line)
		cancel()
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Ensure of the image being built: %v, want to wait until cancelled", err)
	}
	want := fmt.Sprintf("waiting for pid %d building the arm64 bookworm image %s since ", os.Getpid(), building.Hash()[:12])
	if len(said) != 1 || !strings.HasPrefix(said[0], want) {
		t.Fatalf("progress while waiting: %q, want one line starting %q", said, want)
	}
}
