package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/testutil"
)

// TestKilledTemplateBuildLeavesNothing kills `vfleet fleet up` while it
// boots a VM template, then checks that the half-made template and its
// QEMU are still there (so the test can fail: a fleet's QEMUs outlive
// vfleet), and that `vfleet clean` removes both, leaving no template of
// that shape to be mistaken for a whole one.
func TestKilledTemplateBuildLeavesNothing(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	img := testutil.Image(t)
	boot, err := image.EnsureVMBoot(context.Background(), img, nil)
	if err != nil {
		t.Fatal(err)
	}
	templates := filepath.Join(filepath.Dir(boot.BaseDisk), "templates")
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	c := newCLI(t)
	// A memory size no other test uses: its template is never complete.
	cmd := c.command("fleet", "up", "--name", "killed-template", c.scenario(`name: killed-template
baseline: vm
guests:
  - {name: vm, kind: vm, runtime: microvm, accel: tcg, memory: 72M, launch: clone}
workloads:
  - workload: cpu
`))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var partial string
	deadline := time.Now().Add(2 * time.Minute)
	for partial == "" && time.Now().Before(deadline) {
		// The template's QEMU has started once its RAM file exists.
		if m, _ := filepath.Glob(filepath.Join(templates, "*.partial", "ram")); len(m) == 1 {
			partial = filepath.Dir(m[0])
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // into the boot
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if partial == "" {
		t.Fatal("never saw a template being built")
	}
	if _, err := os.Stat(partial); err != nil {
		t.Fatalf("the killed build left no partial template to clean (%v): the test cannot tell what clean does", err)
	}
	if qemus := templateQEMUs(); len(qemus) == 0 {
		t.Fatal("the killed build's QEMU is gone already: the test cannot tell what clean does")
	}
	stdout, stderr, code := c.run("clean")
	if code != 0 {
		t.Fatalf("clean: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(partial); !os.IsNotExist(err) {
		t.Errorf("clean left the half-made template %s (%v)", partial, err)
	}
	if _, err := os.Stat(strings.TrimSuffix(partial, ".partial")); !os.IsNotExist(err) {
		t.Errorf("a killed build left a template that looks whole (%v)", err)
	}
	if qemus := templateQEMUs(); len(qemus) > 0 {
		t.Errorf("the template's QEMU is still running: %v", qemus)
	}
}

// templateQEMUs lists the running QEMUs that boot a template.
func templateQEMUs() []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), "vfleet-template-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// `vfleet clean --templates` removes the VM templates of every image, and
// says so.
func TestCleanTemplates(t *testing.T) {
	testutil.RequiresRoot(t)
	c := newCLI(t)
	state := t.TempDir()
	tpl := filepath.Join(state, "images", "0123", "vm-4567", "templates", "89ab")
	if err := os.MkdirAll(tpl, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(tpl, "done"), tpl + ".lock"} {
		if err := os.WriteFile(f, nil, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(c.bin, "--state-dir", state, "--db", c.db, "clean", "--templates")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "removed VM template "+tpl) {
		t.Fatalf("clean --templates: %v\n%s", err, out)
	}
	if _, err := os.Stat(tpl); !os.IsNotExist(err) {
		t.Errorf("template still there (%v)", err)
	}
}
