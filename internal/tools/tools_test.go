package tools

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestParseVersionOfEveryKnownTool(t *testing.T) {
	want := map[string]string{
		"runc": "1.1.5+ds1", "crun": "1.8.1", "runsc": "release-20240807.0", "kata-runtime": "3.7.0",
		"lxc-start": "5.0.2", "mmdebstrap": "1.3.5", "qemu-system-x86_64": "7.2.22", "qemu-system-aarch64": "7.2.22", "qemu-img": "7.2.22", "genisoimage": "1.1.11", "clang": "14.0.6",
		"x86_64-linux-gnu-gcc": "12.2.0", "aarch64-linux-gnu-gcc": "12.2.0",
		"firecracker": "1.8.0", "cloud-hypervisor": "40.0.0",
		"ovs-vswitchd": "3.1.0", "ovs-vsctl": "3.1.0", "ovsdb-server": "3.1.0", "ovsdb-tool": "3.1.0",
		"passt": "unknown version", "ethtool": "6.1",
	}
	for _, name := range Known() {
		banner, err := os.ReadFile(filepath.Join("testdata", name+".version"))
		if err != nil {
			t.Errorf("every known tool needs a banner under testdata: %v", err)
			continue
		}
		got, err := ParseVersion(name, banner)
		if err != nil || got != want[name] {
			t.Errorf("%s: got %q, %v; want %q", name, got, err, want[name])
		}
	}
}

func TestParseVersionRejectsAnotherToolsBanner(t *testing.T) {
	// crun's banner must not pass for runc's, nor QEMU's for qemu-img's.
	for name, other := range map[string]string{"lxc-start": "runc", "runc": "crun", "qemu-img": "qemu-system-x86_64", "clang": "runc", "ovsdb-server": "ovsdb-tool"} {
		banner, err := os.ReadFile(filepath.Join("testdata", other+".version"))
		if err != nil {
			t.Fatal(err)
		}
		if v, err := ParseVersion(name, banner); err == nil {
			t.Errorf("%s accepted %s's banner as version %q", name, other, v)
		}
	}
}

func TestEveryToolSaysHowToInstallIt(t *testing.T) {
	notInDebian := map[string]bool{"kata-runtime": true, "firecracker": true, "cloud-hypervisor": true}
	for _, name := range Known() {
		s, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if notInDebian[name] != (s.Package == "") {
			t.Errorf("%s: Debian package %q", name, s.Package)
		}
		if s.Install == "" || len(s.VersionArgs) == 0 {
			t.Errorf("%s: incomplete entry %+v", name, s)
		}
	}
}

func TestFindMissingNamesThePackage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for name, msg := range map[string]string{
		"runc":     "runc not found in PATH: install the Debian package runc (from vfleet's checkout: scripts/deps.sh runc)",
		"qemu-img": "qemu-img not found in PATH: install the Debian package qemu-utils (from vfleet's checkout: scripts/deps.sh qemu-utils)",
		"runsc":    "runsc not found in PATH: install the Debian package runsc (from vfleet's checkout: scripts/deps.sh runsc)",
	} {
		_, err := Find(name)
		if !errors.Is(err, ErrMissing) || err.Error() != msg {
			t.Errorf("%s: err = %v, want ErrMissing saying %q", name, err, msg)
		}
	}
}

// The hint a missing tool gives names scripts/deps.sh with one of the
// tool's packages: the script must know every such package as part of a
// need, or a user following the hint gets a usage error.
func TestDepsScriptKnowsEveryPackageAHintNames(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "scripts", "deps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	inNeed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*(?:\[\w+\]=|need\[\w+\]\+?=)"([^"]*)"`).FindAllStringSubmatch(string(script), -1) {
		for _, p := range strings.Fields(m[1]) {
			inNeed[p] = true
		}
	}
	if len(inNeed) < 20 {
		t.Fatalf("read only %d packages from the needs of scripts/deps.sh: has its layout changed?", len(inNeed))
	}
	for _, name := range Known() {
		s, _ := Lookup(name)
		if s.Package == "" {
			continue
		}
		for _, p := range strings.Split(s.Package, " and ") {
			// The other architecture's cross compiler is in the need
			// of the host the script runs on.
			if !inNeed[p] && !strings.Contains(p, "-cross") && !strings.Contains(p, "-linux-gnu") {
				t.Errorf("%s: its package %s is in no need of scripts/deps.sh", name, p)
			}
		}
	}
}

func TestFindUnknownIsAnError(t *testing.T) {
	_, err := Find("no-such-tool")
	if !errors.Is(err, ErrUnknown) || errors.Is(err, ErrMissing) {
		t.Fatalf("err = %v, want ErrUnknown and not ErrMissing", err)
	}
	if _, err := ParseVersion("no-such-tool", nil); !errors.Is(err, ErrUnknown) {
		t.Fatalf("ParseVersion: err = %v, want ErrUnknown", err)
	}
}

// TestFindAndVersionOnThisHost runs the real tools the project needs on a
// development host; a tool that is absent is skipped by name.
func TestFindAndVersionOnThisHost(t *testing.T) {
	for _, name := range Known() {
		t.Run(name, func(t *testing.T) {
			if _, err := exec.LookPath(name); err != nil {
				t.Skipf("%s is not installed here", name)
			}
			tool, err := Find(name)
			if err != nil {
				t.Fatal(err)
			}
			v, err := Version(context.Background(), tool)
			if err != nil || v == "" {
				t.Fatalf("version of %s: %q, %v", tool.Path, v, err)
			}
			t.Logf("%s %s", tool.Path, v)
		})
	}
}
