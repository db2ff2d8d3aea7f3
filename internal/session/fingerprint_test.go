package session

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/tools"
	"github.com/vfleet/vfleet/internal/workload"
)

// Every run records the version of each program a registered workload
// runs from a Debian package, as the image's package list has it.
func TestFingerprintRecordsEveryWorkloadsPackage(t *testing.T) {
	img := &image.Image{Manifest: image.Manifest{Hash: "h", Packages: map[string]string{"procps": "2:4.0.2-3"}}}
	for _, name := range workload.Names() {
		w, _ := workload.Lookup(name)
		for _, p := range w.Programs() {
			if p.Package != "" {
				img.Manifest.Packages[p.Package] = "1.0-" + p.Name
			}
		}
	}
	fp, err := fingerprint(context.Background(), img, nil)
	if err != nil {
		t.Fatal(err)
	}
	for pkg, v := range img.Manifest.Packages {
		if pkg == "procps" {
			if _, ok := fp.ToolVersions[pkg]; ok {
				t.Errorf("records %s, which no workload runs", pkg)
			}
			continue
		}
		if fp.ToolVersions[pkg] != v {
			t.Errorf("%s recorded as %q, want %q", pkg, fp.ToolVersions[pkg], v)
		}
	}
}

// programKind runs its guests with a host program, as an OCI runtime or
// QEMU does.
type programKind struct{ probingKind }

func (programKind) Program(spec guest.Spec) string { return spec.Runtime }

// sessionRuntime stands for a program a kind registers with
// internal/tools, as the container kind does its runtimes.
const sessionRuntime = "session-test-runtime"

func init() {
	guest.Register(&programKind{probingKind{name: "session-program"}})
	tools.Register(tools.Spec{Name: sessionRuntime, Package: "session-test-pkg", Banner: regexp.MustCompile(`(?m)^session-test-runtime version (\S+)`)})
}

// A run records the version of what runs each kind's guests, once, for
// whatever kind names it.
func TestFingerprintRecordsWhatRunsTheGuests(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\necho 'session-test-runtime version 1.2.3'\n"
	if err := os.WriteFile(filepath.Join(dir, sessionRuntime), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	img := &image.Image{Manifest: image.Manifest{Hash: "h"}}
	spec := &scenario.Spec{Guests: []scenario.GuestGroup{
		{Name: "a", Spec: guest.Spec{Kind: "session-program", Runtime: sessionRuntime}},
		{Name: "b", Spec: guest.Spec{Kind: probed.name, Runtime: "r1"}},
	}}
	fp, err := fingerprint(context.Background(), img, []*scenario.Spec{spec})
	if err != nil {
		t.Fatal(err)
	}
	if v := fp.ToolVersions[sessionRuntime]; v != "1.2.3" {
		t.Errorf("%s's version not recorded: %v", sessionRuntime, fp.ToolVersions)
	}
	if _, ok := fp.ToolVersions["r1"]; ok {
		t.Errorf("recorded a version for a kind that names no program: %v", fp.ToolVersions)
	}
}
