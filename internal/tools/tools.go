package tools

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// ErrMissing classifies a tool that is known but not installed.
var ErrMissing = errors.New("tool not installed")

// ErrUnknown classifies a lookup of a name this package has no entry for: a
// caller's mistake, not a property of the host.
var ErrUnknown = errors.New("unknown tool")

// versionTimeout bounds a version probe: a banner is printed at once, so a
// tool still running after this is wedged, and doctor must not wait on it.
const versionTimeout = 5 * time.Second

// Spec is what vfleet knows about one tool before looking for it.
type Spec struct {
	Name string
	// Package is the Debian package to install for the tool, empty when
	// Debian does not ship it.
	Package string
	// Install tells a user how to get the tool, e.g. "install the Debian
	// package runc".
	Install     string
	VersionArgs []string
	// Banner captures the version from what the tool prints for
	// VersionArgs (see testdata/).
	Banner *regexp.Regexp
}

// DebianInstall tells a user how to install Debian packages that vfleet
// needs on this host. vfleet's checkout installs what each need takes,
// with the host set-up it asks for, through scripts/deps.sh, which takes
// the name of any one of the need's packages: a fresh host gets only what
// the default scenario needs, and a refused scenario names the step.
func DebianInstall(pkgs ...string) string {
	what := "package " + pkgs[0]
	if len(pkgs) > 1 {
		what = "packages " + strings.Join(pkgs[:len(pkgs)-1], ", ") + " and " + pkgs[len(pkgs)-1]
	}
	return "install the Debian " + what + " (from vfleet's checkout: scripts/deps.sh " + pkgs[0] + ")"
}

// Upstream is the install hint of a tool Debian does not ship.
func Upstream(project, where string) string {
	return project + " is not packaged in Debian: install it from " + where
}

// ovsBanner matches the first line every Open vSwitch program prints.
func ovsBanner(program string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(program) + ` \(Open vSwitch\) (\S+)`)
}

// gccBanner matches the first line gcc prints, under the name it was run by.
func gccBanner(program string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(program) + ` \(.*\) (\S+)$`)
}

// gccPackage is the Debian package of the C compiler for arch, with the
// static C library it links against.
func gccPackage(arch, triplet string) string {
	if arch == runtime.GOARCH {
		return "gcc and libc6-dev"
	}
	return "gcc-" + triplet + " and libc6-dev-" + arch + "-cross"
}

// known is the table of tools: those vfleet's own packages share, here,
// and those one package drives alone (a guest kind's runtime), which it
// registers from its init.
var (
	knownMu sync.RWMutex
	known   = map[string]Spec{}
)

func init() {
	for _, s := range []Spec{
		{Name: "mmdebstrap", Package: "mmdebstrap", Banner: regexp.MustCompile(`(?m)^mmdebstrap (\S+)`)},
		{Name: "qemu-system-x86_64", Package: "qemu-system-x86", Banner: regexp.MustCompile(`(?m)^QEMU emulator version (\S+)`)},
		{Name: "qemu-system-aarch64", Package: "qemu-system-arm", Banner: regexp.MustCompile(`(?m)^QEMU emulator version (\S+)`)},
		{Name: "qemu-img", Package: "qemu-utils", Banner: regexp.MustCompile(`(?m)^qemu-img version (\S+)`)},
		{Name: "genisoimage", Package: "genisoimage", Banner: regexp.MustCompile(`(?m)^genisoimage (\S+)`)},
		{Name: "clang", Package: "clang", Banner: regexp.MustCompile(`(?m)^(?:\S+ )?clang version (\S+)`)},
		// The C compilers that build vfleet's own programs into an image:
		// Debian's gcc is the host's own architecture's, a gcc-TRIPLET
		// package the other's; either needs its C library's static files.
		{Name: "x86_64-linux-gnu-gcc", Package: gccPackage("amd64", "x86-64-linux-gnu"), Banner: gccBanner("x86_64-linux-gnu-gcc")},
		{Name: "aarch64-linux-gnu-gcc", Package: gccPackage("arm64", "aarch64-linux-gnu"), Banner: gccBanner("aarch64-linux-gnu-gcc")},
		{Name: "firecracker", Install: Upstream("Firecracker", "the Firecracker releases"), Banner: regexp.MustCompile(`(?m)^Firecracker v(\S+)`)},
		{Name: "cloud-hypervisor", Install: Upstream("Cloud Hypervisor", "the Cloud Hypervisor releases"), Banner: regexp.MustCompile(`(?m)^cloud-hypervisor v(\S+)`)},
		// Debian ships the database programs in openvswitch-common, which
		// openvswitch-switch depends on: the one package brings all four.
		{Name: "ovs-vswitchd", Package: "openvswitch-switch", Banner: ovsBanner("ovs-vswitchd")},
		{Name: "ovs-vsctl", Package: "openvswitch-switch", Banner: ovsBanner("ovs-vsctl")},
		{Name: "ovsdb-server", Package: "openvswitch-switch", Banner: ovsBanner("ovsdb-server")},
		{Name: "ovsdb-tool", Package: "openvswitch-switch", Banner: ovsBanner("ovsdb-tool")},
		// Debian 12's build says "passt unknown version": its banner names
		// no release, and the record says so rather than nothing.
		{Name: "passt", Package: "passt", Banner: regexp.MustCompile(`(?m)^passt (.+)$`)},
		// It describes a dedicated NIC for the run's record.
		{Name: "ethtool", Package: "ethtool", Banner: regexp.MustCompile(`(?m)^ethtool version (\S+)`)},
	} {
		Register(s)
	}
}

// Register adds a tool to the table, from the init of the package that
// drives it, so that a new guest kind's program needs no edit here:
// Package (or, for a tool Debian does not ship, Install) says where it
// comes from, and Banner, which must match the tool's --version output,
// captures its version. A name registered twice is a programming error.
func Register(s Spec) {
	if s.Name == "" || s.Banner == nil || (s.Package == "" && s.Install == "") {
		panic(fmt.Sprintf("tool %q registered without its name, banner or origin", s.Name))
	}
	if s.Package != "" {
		s.Install = DebianInstall(strings.Split(s.Package, " and ")...)
	}
	// Every tool prints its banner for --version.
	s.VersionArgs = []string{"--version"}
	knownMu.Lock()
	defer knownMu.Unlock()
	if _, dup := known[s.Name]; dup {
		panic("tool registered twice: " + s.Name)
	}
	known[s.Name] = s
}

// Known lists the names of the tools this package knows, sorted.
func Known() []string {
	knownMu.RLock()
	defer knownMu.RUnlock()
	names := make([]string, 0, len(known))
	for n := range known {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns what is known about a tool without looking for it.
func Lookup(name string) (Spec, error) {
	knownMu.RLock()
	s, ok := known[name]
	knownMu.RUnlock()
	if !ok {
		return Spec{}, fmt.Errorf("%w %q (known: %s)", ErrUnknown, name, strings.Join(Known(), ", "))
	}
	return s, nil
}

// Tool is a tool found on this host.
type Tool struct {
	Spec
	Path string
}

// MissingError says which tool is absent and how to install it. It is
// ErrMissing to errors.Is.
type MissingError struct {
	Name    string
	Install string
}

func (e *MissingError) Error() string { return e.Name + " not found in PATH: " + e.Install }

// Is makes errors.Is(err, ErrMissing) true while the message stays the
// user-facing sentence alone.
func (e *MissingError) Is(target error) bool { return target == ErrMissing }

// Find locates a known tool in PATH.
func Find(name string) (Tool, error) {
	s, err := Lookup(name)
	if err != nil {
		return Tool{}, err
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return Tool{}, &MissingError{Name: name, Install: s.Install}
	}
	return Tool{Spec: s, Path: p}, nil
}

// Version runs the tool's version command, bounded in time, and extracts
// the version from what it prints.
func Version(ctx context.Context, t Tool) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, t.Path, t.VersionArgs...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", t.Path, strings.Join(t.VersionArgs, " "), err)
	}
	return ParseVersion(t.Name, out)
}

// ParseVersion extracts the version from the banner a known tool prints.
func ParseVersion(name string, banner []byte) (string, error) {
	s, err := Lookup(name)
	if err != nil {
		return "", err
	}
	m := s.Banner.FindSubmatch(banner)
	if m == nil {
		return "", fmt.Errorf("%s: no version in %q", name, firstLine(banner))
	}
	return string(m[1]), nil
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}
