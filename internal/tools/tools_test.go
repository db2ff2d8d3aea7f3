package tools_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/internal/tools"
)

// The tools this package's own table holds; those a package registers
// itself are tested there.
func TestParseVersionOfEveryKnownTool(t *testing.T) {
	want := map[string]string{
		"mmdebstrap": "1.3.5", "qemu-system-x86_64": "7.2.22", "qemu-system-aarch64": "7.2.22", "qemu-img": "7.2.22", "genisoimage": "1.1.11", "clang": "14.0.6",
		"x86_64-linux-gnu-gcc": "12.2.0", "aarch64-linux-gnu-gcc": "12.2.0",
		"firecracker": "1.8.0", "cloud-hypervisor": "40.0.0",
		"ovs-vswitchd": "3.1.0", "ovs-vsctl": "3.1.0", "ovsdb-server": "3.1.0", "ovsdb-tool": "3.1.0",
		"passt": "unknown version", "ethtool": "6.1", registered: "1.2",
	}
	for _, name := range tools.Known() {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: no version to read from its banner", name)
		}
	}
	testutil.ToolBanners(t, want)
}

func TestParseVersionRejectsAnotherToolsBanner(t *testing.T) {
	// QEMU's banner must not pass for qemu-img's.
	for name, other := range map[string]string{"qemu-img": "qemu-system-x86_64", "clang": "mmdebstrap", "ovsdb-server": "ovsdb-tool"} {
		banner, err := os.ReadFile(filepath.Join("testdata", other+".version"))
		if err != nil {
			t.Fatal(err)
		}
		if v, err := tools.ParseVersion(name, banner); err == nil {
			t.Errorf("%s accepted %s's banner as version %q", name, other, v)
		}
	}
}

func TestEveryToolSaysHowToInstallIt(t *testing.T) {
	notInDebian := map[string]bool{"firecracker": true, "cloud-hypervisor": true}
	for _, name := range tools.Known() {
		s, err := tools.Lookup(name)
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
		"qemu-img": "qemu-img not found in PATH: install the Debian package qemu-utils (from vfleet's checkout: scripts/deps.sh qemu-utils)",
		"passt":    "passt not found in PATH: install the Debian package passt (from vfleet's checkout: scripts/deps.sh passt)",
	} {
		_, err := tools.Find(name)
		if !errors.Is(err, tools.ErrMissing) || err.Error() != msg {
			t.Errorf("%s: err = %v, want ErrMissing saying %q", name, err, msg)
		}
	}
}

func TestFindUnknownIsAnError(t *testing.T) {
	_, err := tools.Find("no-such-tool")
	if !errors.Is(err, tools.ErrUnknown) || errors.Is(err, tools.ErrMissing) {
		t.Fatalf("err = %v, want ErrUnknown and not ErrMissing", err)
	}
	if _, err := tools.ParseVersion("no-such-tool", nil); !errors.Is(err, tools.ErrUnknown) {
		t.Fatalf("ParseVersion: err = %v, want ErrUnknown", err)
	}
}

// TestFindAndVersionOnThisHost runs the real tools the project needs on a
// development host; a tool that is absent is skipped by name.
func TestFindAndVersionOnThisHost(t *testing.T) {
	for _, name := range tools.Known() {
		t.Run(name, func(t *testing.T) {
			if _, err := exec.LookPath(name); err != nil {
				t.Skipf("%s is not installed here", name)
			}
			tool, err := tools.Find(name)
			if err != nil {
				t.Fatal(err)
			}
			v, err := tools.Version(context.Background(), tool)
			if err != nil || v == "" {
				t.Fatalf("version of %s: %q, %v", tool.Path, v, err)
			}
			t.Logf("%s %s", tool.Path, v)
		})
	}
}

// registered stands for a tool a package other than this one drives
// alone and registers from its init, as a guest kind does its runtime.
const registered = "tools-test-registered"

func init() {
	tools.Register(tools.Spec{Name: registered, Package: "tools-test-pkg", Banner: regexp.MustCompile(`(?m)^registered (\S+)`)})
}

// A registered tool is found, named with its package and read for its
// version as any of the table's own; a second registration of a name, or
// one without a banner or an origin, is a programming error.
func TestRegisteredToolIsKnownLikeTheTables(t *testing.T) {
	name := registered
	if !slices.Contains(tools.Known(), name) {
		t.Fatalf("%s not in %v", name, tools.Known())
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := tools.Find(name); !errors.Is(err, tools.ErrMissing) || !strings.Contains(err.Error(), "install the Debian package tools-test-pkg") {
		t.Errorf("missing: %v", err)
	}
	for _, bad := range []tools.Spec{{Name: name, Package: "again", Banner: regexp.MustCompile(`x`)}, {Name: "no-banner", Package: "p"}, {Name: "no-origin", Banner: regexp.MustCompile(`x`)}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("registering %+v did not panic", bad)
				}
			}()
			tools.Register(bad)
		}()
	}
}
