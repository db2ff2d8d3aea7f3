package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/internal/workload"
)

// A user's image (not vfleet's: systemd as init, no agent) runs in
// containers and as a bare baseline from its OCI forms, and in a VM from
// its disk booted with its own kernel, beside the baseline on vfleet's
// image: a built-in workload, a command that sees the image's own
// environment and the guest's identity, and a built-in whose tool the
// image lacks, which fails naming both.
func TestUserImagesEndToEnd(t *testing.T) {
	testutil.SharesMachine(t)
	t.Parallel()
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	testutil.Image(t)
	f := testutil.Foreign(t)
	d := testutil.ForeignVM(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	c := newCLI(t)
	stdout, stderr, code := c.run("run", c.scenario(`name: user-image
repetitions: 1
warmup: 0
duration: 1s
guests:
  - {name: host, kind: host}
  - {name: theirs, kind: container, image: `+f.Layout+`}
  - {name: archived, kind: container, image: `+f.DockerArchive+`}
  - {name: bare-theirs, kind: host, image: `+f.OCIArchive+`}
  - {name: vm-theirs, kind: vm, accel: tcg, image: `+d.Raw+`, kernel: `+d.Kernel+`, initrd: `+d.Initrd+`}
workloads:
  - workload: cpu
  - workload: ctxswitch
  - id: env
    workload: command
    params:
      argv: [sh, -c, 'getent hosts localhost "$(hostname)" >/dev/null && echo "score: ${FOREIGN_BENCH_SCORE:-0}"']
      metrics:
        - {name: score, unit: points, better: higher, regex: 'score: (\d+)'}
`), "--html", "-")
	if code != exitStepsFailed {
		t.Fatalf("exit %d, want %d (ctxswitch fails in the user's image):\n%s\n%s", code, exitStepsFailed, stdout, stderr)
	}
	for _, img := range []string{f.Layout, d.Raw} {
		if !strings.Contains(stderr, "stress-ng is not in image "+img) {
			t.Errorf("the missing tool is not named with its image %s:\n%s", img, stderr)
		}
	}
	got := map[string]float64{}
	for _, s := range c.latestSamples() {
		got[s.Group+" "+s.Metric] = s.Value
	}
	// A VM's disk has no OCI config: its environment is its init's.
	for key, want := range map[string]float64{"host score": 0, "theirs score": 42, "archived score": 42, "bare-theirs score": 42, "vm-theirs score": 0} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v; the run said:\n%s", key, v, ok, want, stderr)
		}
	}
	for _, key := range []string{"host events_per_sec", "theirs events_per_sec", "archived events_per_sec", "vm-theirs events_per_sec", "host switch_ops_per_sec"} {
		if got[key] <= 0 {
			t.Errorf("%s missing: %v", key, got)
		}
	}
	stdout, _, code = c.run("image", "inspect", f.OCIArchive)
	if code != 0 || !regexp.MustCompile(`(?m)^cpu +sysbench +/usr/bin/sysbench$`).MatchString(stdout) ||
		!regexp.MustCompile(`(?m)^ctxswitch +stress-ng +no`).MatchString(stdout) {
		t.Errorf("image inspect (exit %d):\n%s", code, stdout)
	}
	// qcow2 version 3, and nothing QEMU can read after that.
	garbled := filepath.Join(t.TempDir(), "garbled.qcow2")
	if err := os.WriteFile(garbled, append([]byte("QFI\xfb\x00\x00\x00\x03"), make([]byte, 4096)...), 0o644); err != nil {
		t.Fatal(err)
	}
	for group, want := range map[string]string{
		"{kind: container, image: " + t.TempDir() + "}":                        "s.yaml:4:30: guests[1].image: not a usable OCI image",
		"{kind: vm, image: " + t.TempDir() + ", kernel: " + d.Kernel + "}":     "is a directory, not a regular file: give a regular file of at most 1 TiB",
		"{kind: vm, image: " + garbled + ", kernel: " + d.Kernel + "}":         "s.yaml:4:23: guests[1].image: not a usable VM disk image: QEMU cannot read",
		"{kind: vm, image: " + d.QCOW2 + "}":                                   "s.yaml:4:5: guests[1]: guest vm: a user's disk boots either with the user's kernel (kernel:",
		"{kind: vm, runtime: microvm, image: " + d.QCOW2 + ", firmware: uefi}": "firmware: uefi needs runtime q35",
		"{kind: container, kernel: " + d.Kernel + "}":                          "kernel",
		"{kind: vm, image: " + d.QCOW2 + ", kernel: " + d.Kernel + "-gone}":    "guests[1].kernel: " + workload.Clip(d.Kernel+"-gone") + " does not exist",
	} {
		_, stderr, code = c.run("run", c.scenario("name: bad\nguests:\n  - {kind: host}\n  - "+group+"\nworkloads:\n  - workload: cpu\n"))
		if code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, want 2 and %q:\n%s", group, code, want, stderr)
		}
	}
}

// A damaged image is refused when the scenario is loaded, at its field's
// line, naming the blob: a layer that is no tar.gz, and a layer swapped
// for another (its manifest unchanged).
func TestDamagedOCIImageRefusedAtLoad(t *testing.T) {
	whole := testutil.TarGz(t, map[string]string{"etc/os-release": "ID=x\n"})
	corrupt, corruptBlobs := testutil.OCILayout(t, whole[:len(whole)-10])
	swapped, swappedBlobs := testutil.OCILayout(t, whole)
	if err := os.WriteFile(swappedBlobs[0], testutil.TarGz(t, map[string]string{"etc/os-release": "ID=y\n"}), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t)
	for dir, want := range map[string]string{
		corrupt: "layer 1 (sha256:" + filepath.Base(corruptBlobs[0]) + "): unexpected EOF",
		swapped: "layer 1 (sha256:" + filepath.Base(swappedBlobs[0]) + "): blob does not match its descriptor",
	} {
		_, stderr, code := c.run("run", c.scenario("name: bad\nguests:\n  - {kind: host}\n  - {kind: container, image: "+dir+"}\nworkloads:\n  - workload: cpu\n"))
		// The digest is a word over the 60 characters an error quotes.
		want = workload.ClipWords(want)
		if code != exitUsage || !strings.Contains(stderr, "s.yaml:4:30: guests[1].image: not a usable OCI image") || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, want %d, the field's line and %q:\n%s", code, exitUsage, want, stderr)
		}
	}
}
