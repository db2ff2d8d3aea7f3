package testutil

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// HostState is what an escape attempt that went through would change on
// the host, read so that a test can show it did not: the kernel's core
// dump handler, every cgroup v1 hierarchy's release agent, whether pid 1
// is traced, the loaded modules, the mount table, and the given files'
// contents (the binaries a guest's attempts open for writing).
func HostState(t testing.TB, files ...string) map[string]string {
	t.Helper()
	state := map[string]string{
		"core_pattern":     readOr("/proc/sys/kernel/core_pattern"),
		"pid 1 tracer":     statusLine("/proc/1/status", "TracerPid:"),
		"modules":          readOr("/proc/modules"),
		"modules_disabled": readOr("/proc/sys/kernel/modules_disabled"),
	}
	points, err := MountPoints("/proc")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(points)
	state["mounts"] = strings.Join(points, "\n")
	for _, p := range points {
		if b, err := os.ReadFile(filepath.Join(p, "release_agent")); err == nil {
			state["release_agent of "+p] = string(b)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		state[f] = fmt.Sprintf("sha256 %x, modified %s", sha256.Sum256(b), fi.ModTime())
	}
	return state
}

// CheckHostState fails the test for every way the host differs from
// before.
func CheckHostState(t testing.TB, before map[string]string, files ...string) {
	t.Helper()
	after := HostState(t, files...)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("the host's %s changed: %q, was %q", k, after[k], v)
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("the host has a new %s: %q", k, v)
		}
	}
}

func readOr(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "error: " + err.Error()
	}
	return string(b)
}

func statusLine(path, prefix string) string {
	for _, line := range strings.Split(readOr(path), "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return readOr(path)
}
