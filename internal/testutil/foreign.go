package testutil

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/vfleet/vfleet/internal/flock"
	"github.com/vfleet/vfleet/internal/image"
)

// ForeignImage is a guest image that is not vfleet's: a minimal Debian
// with systemd as its init, a few measuring tools and no agent, as a user
// would bring it, packed the three ways vfleet reads OCI images.
type ForeignImage struct {
	Layout, OCIArchive, DockerArchive string
	// Env is in the image's config: a user's image brings its own.
	Env []string
}

// ForeignMark is a variable only the foreign image's config sets, so a
// test can tell that a guest got the image's own environment.
const ForeignMark = "FOREIGN_BENCH_SCORE=42"

func foreignRecipe() image.Recipe {
	return image.Recipe{Format: 1, Suite: "bookworm", Variant: "minbase",
		Packages:     []string{"systemd-sysv", "sysbench", "fio"},
		PathExcludes: []string{"/usr/share/man/*", "/usr/share/doc/*", "/usr/share/locale/*", "/usr/share/info/*"}}
}

// Foreign returns the foreign image, built on first use and kept in the
// test state root.
func Foreign(t testing.TB) ForeignImage {
	t.Helper()
	RequiresRoot(t)
	return foreign(t)
}

// foreign, foreignVM and foreignUEFI are their fixtures without the
// machine: building them changes nothing a leak check looks at.
func foreign(t testing.TB) ForeignImage {
	t.Helper()
	r := foreignRecipe()
	dir := filepath.Join(StateRoot(), "foreign", r.Hash()[:16])
	f := ForeignImage{Layout: filepath.Join(dir, "layout"), OCIArchive: filepath.Join(dir, "oci.tar"), DockerArchive: filepath.Join(dir, "docker.tar"),
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", ForeignMark}}
	buildOnce(t, r, dir, func(img *image.Image) { packOCI(t, img, f) })
	return f
}

// ForeignDisk is the foreign image as a user's VM disk comes: one ext4
// file system as a qcow2 and as a raw disk, and the kernel and initrd the
// image carries, beside them as a user would extract them. The root has
// systemd as its init, udev, and no agent.
type ForeignDisk struct {
	QCOW2, Raw, Kernel, Initrd string
}

func foreignVMRecipe() image.Recipe {
	r := foreignRecipe()
	r.Packages = append(r.Packages, "udev", "linux-image-cloud-amd64")
	return r
}

// ForeignVM returns the foreign VM disk, built on first use and kept in
// the test state root.
func ForeignVM(t testing.TB) ForeignDisk {
	t.Helper()
	RequiresRoot(t)
	return foreignVM(t)
}

func foreignVM(t testing.TB) ForeignDisk {
	t.Helper()
	RequiresTool(t, "qemu-img", "qemu-utils")
	r := foreignVMRecipe()
	dir := filepath.Join(StateRoot(), "foreign-vm", r.Hash()[:16])
	d := ForeignDisk{QCOW2: filepath.Join(dir, "disk.qcow2"), Raw: filepath.Join(dir, "disk.raw"),
		Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd.img")}
	buildOnce(t, r, dir, func(img *image.Image) {
		if img.KernelPath == "" || img.InitrdPath == "" {
			t.Fatalf("foreign VM image has no kernel or initrd: %+v", img.Manifest)
		}
		run(t, "cp", img.KernelPath, d.Kernel)
		run(t, "cp", img.InitrdPath, d.Initrd)
		// The guest's root is the whole disk, as DefaultUserCmdline says.
		run(t, "mkfs.ext4", "-q", "-F", "-L", "foreign-root", "-d", img.RootFS, d.Raw, "3G")
		run(t, "qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", d.Raw, d.QCOW2)
	})
	return d
}

// buildOnce builds the image of recipe r and hands it to pack, which fills
// dir, once per machine: a later call finds dir done.
func buildOnce(t testing.TB, r image.Recipe, dir string, pack func(*image.Image)) {
	t.Helper()
	RequiresTool(t, "mmdebstrap", "mmdebstrap")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	unlock, err := flock.Lock(ctx, filepath.Join(filepath.Dir(dir), ".lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
		return
	}
	os.RemoveAll(dir)
	img, err := image.Ensure(ctx, image.EnsureOptions{Root: StateRoot(), Recipe: r, Progress: func(line string) { t.Log("foreign image:", line) }})
	if err != nil {
		t.Fatalf("foreign image: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pack(img)
	if err := os.WriteFile(filepath.Join(dir, "done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// packOCI packs the image's root as f's layout and archives.
func packOCI(t testing.TB, img *image.Image, f ForeignImage) {
	t.Helper()
	dir := filepath.Dir(f.Layout)
	layerTar := filepath.Join(dir, "rootfs.tar")
	run(t, "tar", "-C", img.RootFS, "--numeric-owner", "-cf", layerTar, ".")
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return os.Open(layerTar) })
	if err != nil {
		t.Fatal(err)
	}
	oci, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := oci.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Env, cfg.Config.Cmd = f.Env, []string{"/sbin/init"}
	if oci, err = mutate.ConfigFile(oci, cfg); err != nil {
		t.Fatal(err)
	}
	p, err := layout.Write(f.Layout, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(oci, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH})); err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(f.DockerArchive, name.MustParseReference("vfleet-test/foreign:1"), oci); err != nil {
		t.Fatal(err)
	}
	run(t, "tar", "-C", f.Layout, "-cf", f.OCIArchive, ".")
	os.Remove(layerTar)
}

func run(t testing.TB, argv ...string) {
	t.Helper()
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v: %s", argv, err, out)
	}
}

// ForeignUEFIDisk is the foreign image as a cloud image comes: a GPT
// disk whose EFI system partition holds a boot loader (systemd-boot), the
// kernel and its initrd, and whose root has cloud-init, systemd, udev and
// no agent.
type ForeignUEFIDisk struct {
	QCOW2 string
}

func foreignUEFIRecipe() image.Recipe {
	r := foreignVMRecipe()
	r.Packages = append(r.Packages, "cloud-init", "systemd-boot-efi")
	return r
}

// Sizes of the UEFI disk's partitions, in MiB; the first starts at 1 MiB.
const (
	uefiESPMiB  = 200
	uefiRootMiB = 2560
)

// ForeignUEFI returns the foreign UEFI disk, built on first use and kept
// in the test state root.
func ForeignUEFI(t testing.TB) ForeignUEFIDisk {
	t.Helper()
	RequiresRoot(t)
	return foreignUEFI(t)
}

func foreignUEFI(t testing.TB) ForeignUEFIDisk {
	t.Helper()
	RequiresTool(t, "qemu-img", "qemu-utils")
	RequiresTool(t, "sfdisk", "fdisk")
	RequiresTool(t, "mkfs.vfat", "dosfstools")
	RequiresTool(t, "mcopy", "mtools")
	r := foreignUEFIRecipe()
	dir := filepath.Join(StateRoot(), "foreign-uefi", r.Hash()[:16])
	d := ForeignUEFIDisk{QCOW2: filepath.Join(dir, "disk.qcow2")}
	buildOnce(t, r, dir, func(img *image.Image) {
		loader := filepath.Join(img.RootFS, "usr/lib/systemd/boot/efi/systemd-bootx64.efi")
		esp, root, raw := filepath.Join(dir, "esp.img"), filepath.Join(dir, "root.img"), filepath.Join(dir, "disk.raw")
		run(t, "mkfs.vfat", "-C", "-n", "ESP", esp, strconv.Itoa(uefiESPMiB*1024))
		files := map[string]string{
			"loader/loader.conf":         "default debian.conf\ntimeout 0\n",
			"loader/entries/debian.conf": "title Debian\nlinux /vmlinuz\ninitrd /initrd.img\noptions root=/dev/vda2 rw console=ttyS0\n",
		}
		for _, sub := range []string{"::/EFI", "::/EFI/BOOT", "::/loader", "::/loader/entries"} {
			run(t, "mmd", "-i", esp, sub)
		}
		run(t, "mcopy", "-i", esp, loader, "::/EFI/BOOT/BOOTX64.EFI")
		run(t, "mcopy", "-i", esp, img.KernelPath, "::/vmlinuz")
		run(t, "mcopy", "-i", esp, img.InitrdPath, "::/initrd.img")
		for name, text := range files {
			p := filepath.Join(dir, filepath.Base(name))
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			run(t, "mcopy", "-i", esp, p, "::/"+name)
		}
		run(t, "mkfs.ext4", "-q", "-F", "-L", "foreign-root", "-d", img.RootFS, root, strconv.Itoa(uefiRootMiB)+"M")
		f, err := os.Create(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(int64(1+uefiESPMiB+uefiRootMiB+1) << 20); err != nil {
			t.Fatal(err)
		}
		f.Close()
		table := fmt.Sprintf("label: gpt\nstart=1MiB, size=%dMiB, type=uefi\nstart=%dMiB, size=%dMiB, type=linux\n", uefiESPMiB, 1+uefiESPMiB, uefiRootMiB)
		cmd := exec.Command("sfdisk", "-q", raw)
		cmd.Stdin = strings.NewReader(table)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sfdisk: %v: %s", err, out)
		}
		run(t, "dd", "if="+esp, "of="+raw, "bs=1M", "seek=1", "conv=notrunc,sparse", "status=none")
		run(t, "dd", "if="+root, "of="+raw, "bs=1M", "seek="+strconv.Itoa(1+uefiESPMiB), "conv=notrunc,sparse", "status=none")
		run(t, "qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", raw, d.QCOW2)
		for _, p := range []string{esp, root, raw} {
			os.Remove(p)
		}
	})
	return d
}
