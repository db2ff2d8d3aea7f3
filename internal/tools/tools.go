package tools

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"time"
)

// ErrMissing is wrapped when a tool is not installed.
var ErrMissing = errors.New("tool not installed")

// Spec is what vfleet knows about one tool.
type Spec struct {
	Name string
	// Install tells how to get it, e.g. "install the Debian package runc".
	Install string
	// Package is the Debian package, empty when Debian does not ship it.
	Package     string
	VersionArgs []string
	versionRE   *regexp.Regexp
}

func debian(pkg string) string { return "install the Debian package " + pkg }

var known = map[string]Spec{}

func init() {
	for _, s := range []Spec{
		{Name: "runc", Package: "runc", VersionArgs: []string{"--version"}, versionRE: regexp.MustCompile(`runc version (\S+)`)},
		{Name: "crun", Package: "crun", VersionArgs: []string{"--version"}, versionRE: regexp.MustCompile(`crun version (\S+)`)},
		{Name: "runsc", Install: "gVisor's runsc is not packaged in Debian; install it from the gVisor releases", VersionArgs: []string{"--version"}, versionRE: regexp.MustCompile(`runsc version (\S+)`)},
		{Name: "kata-runtime", Install: "Kata Containers is not packaged in Debian; install it from the Kata releases", VersionArgs: []string{"--version"}, versionRE: regexp.MustCompile(`kata-runtime\s*:\s*(\S+)`)},
		{Name: "mmdebstrap", Package: "mmdebstrap", VersionArgs: []string{"--version"}, versionRE: regexp.MustCompile(`mmdebstrap (\S+)`)},
		{Name: "qemu-system-x86_64", Package: "qemu-system-x86", VersionArgs: []string{"--version"}, versionRE: regexp.MustCompile(`QEMU emulator version (\S+)`)},
		{Name: "qemu-img", Package: "qemu-utils", VersionArgs: []string{"--version"}, versionRE: regexp.MustCompile(`qemu-img version (\S+)`)},
		{Name: "firecracker", Install: "Firecracker is not packaged in Debian; install it from the Firecracker releases", VersionArgs: []string{"--version"}, versionRE: regexp.MustCompile(`Firecracker v(\S+)`)},
		{Name: "cloud-hypervisor", Install: "Cloud Hypervisor is not packaged in Debian; install it from its releases", VersionArgs: []string{"--version"}, versionRE: regexp.MustCompile(`cloud-hypervisor v?(\S+)`)},
	} {
		if s.Install == "" {
			s.Install = debian(s.Package)
		}
		known[s.Name] = s
	}
}

// Known lists the tools this package knows, sorted.
func Known() []string {
	names := make([]string, 0, len(known))
	for n := range known {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns what is known about a tool.
func Lookup(name string) (Spec, error) {
	s, ok := known[name]
	if !ok {
		return Spec{}, fmt.Errorf("no tool %q is known (known: %s)", name, strings.Join(Known(), ", "))
	}
	return s, nil
}

// Tool is an installed tool.
type Tool struct {
	Spec
	Path string
}

// Find locates a tool in PATH.
func Find(name string) (Tool, error) {
	s, err := Lookup(name)
	if err != nil {
		return Tool{}, err
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return Tool{Spec: s}, fmt.Errorf("%w: %s not found in PATH: %s", ErrMissing, name, s.Install)
	}
	return Tool{Spec: s, Path: p}, nil
}

// Version runs the tool's version command, bounded in time.
func Version(ctx context.Context, t Tool) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, t.Path, t.VersionArgs...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", t.Name, strings.Join(t.VersionArgs, " "), err)
	}
	return ParseVersion(t.Name, out)
}

// ParseVersion extracts the version from a tool's version output.
func ParseVersion(name string, output []byte) (string, error) {
	s, err := Lookup(name)
	if err != nil {
		return "", err
	}
	m := s.versionRE.FindSubmatch(output)
	if m == nil {
		return "", fmt.Errorf("%s: no version in %q", name, firstLine(output))
	}
	return string(m[1]), nil
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
