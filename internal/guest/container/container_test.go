package container

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/vfleet/vfleet/internal/guest"
)

func TestProbeUnknownAndMissingRuntimes(t *testing.T) {
	k, _ := guest.Lookup(KindName)
	err := k.Probe(context.Background(), "lxc")
	if !errors.Is(err, guest.ErrNotSupported) || !strings.Contains(err.Error(), "known: runc") {
		t.Fatalf("unknown runtime: %v", err)
	}
	if os.Geteuid() == 0 {
		t.Setenv("PATH", t.TempDir())
		err = k.Probe(context.Background(), "runc")
		if !errors.Is(err, guest.ErrNotSupported) || !strings.Contains(err.Error(), "Debian package runc") {
			t.Fatalf("missing runtime: %v", err)
		}
	}
}

// crun refuses a hybrid host whose unified hierarchy holds a controller;
// the probe must say which and how to move it, rather than pass crun's
// message through.
func TestExplainCrunOnHybridCgroups(t *testing.T) {
	msg := "cgroups in hybrid mode not supported, drop all controllers from cgroupv2"
	got := explainFailure("crun", msg, "hybrid", []string{"hugetlb"})
	for _, want := range []string{"holds hugetlb", "mount -t cgroup -o hugetlb cgroup /sys/fs/cgroup/hugetlb", "use runc"} {
		if !strings.Contains(got, want) {
			t.Errorf("explanation %q lacks %q", got, want)
		}
	}
	if got := explainFailure("crun", msg, "hybrid", nil); strings.Contains(got, "mount") || !strings.Contains(got, "use runc") {
		t.Errorf("with no controller to move: %q", got)
	}
	if got := explainFailure("crun", msg, "v2", []string{"hugetlb"}); got != "" {
		t.Fatalf("no explanation expected on v2, got %q", got)
	}
}

func TestUnifiedControllers(t *testing.T) {
	sys := t.TempDir()
	if got := unifiedControllers(sys); got != nil {
		t.Errorf("no unified hierarchy: %v", got)
	}
	dir := filepath.Join(sys, "fs", "cgroup", "unified")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte("hugetlb misc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := unifiedControllers(sys); strings.Join(got, ",") != "hugetlb,misc" {
		t.Errorf("controllers = %v", got)
	}
}

func mustBundle(t *testing.T, o BundleOptions) *specs.Spec {
	t.Helper()
	s, err := Bundle(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBundleCarriesLimitsAndIsolation(t *testing.T) {
	s := mustBundle(t, BundleOptions{Hostname: "g", RootPath: "/r", Args: []string{"/a"}, CgroupsPath: "/vfleet/r/g", CPUs: "1", MemoryBytes: 256 << 20,
		Binds: []Bind{{Source: "/host/sock", Destination: "/run/vfleet"}}})
	if s.Linux.Resources.CPU.Cpus != "1" || *s.Linux.Resources.Memory.Limit != 256<<20 || s.Linux.CgroupsPath != "/vfleet/r/g" {
		t.Fatalf("limits: %+v", s.Linux.Resources)
	}
	var ns []string
	for _, n := range s.Linux.Namespaces {
		ns = append(ns, string(n.Type))
	}
	if got := strings.Join(ns, ","); got != "pid,ipc,uts,mount,network" {
		t.Fatalf("namespaces = %s", got)
	}
	last := s.Mounts[len(s.Mounts)-1]
	if last.Source != "/host/sock" || last.Destination != "/run/vfleet" || last.Type != "bind" {
		t.Fatalf("socket bind = %+v", last)
	}
	capped := mustBundle(t, BundleOptions{CPULimit: 0.9})
	if cpu := capped.Linux.Resources.CPU; cpu == nil || *cpu.Quota != 90000 || *cpu.Period != 100000 {
		t.Fatalf("cpu limit 0.9: %+v", cpu)
	}
	none := mustBundle(t, BundleOptions{})
	if none.Linux.Resources.CPU != nil || none.Linux.Resources.Memory != nil {
		t.Fatal("no limits asked, some set")
	}
}

func TestReadPidFile(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]int{"4242": 4242, "4242\n": 4242, "": 0, "0": 0, "-3": 0, "pid 12": 0} {
		p := filepath.Join(dir, "container.pid")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := readPidFile(p)
		if want > 0 && (err != nil || got != want) {
			t.Errorf("%q: got %d, %v; want %d", content, got, err, want)
		}
		if want == 0 && (err == nil || !strings.Contains(err.Error(), p)) {
			t.Errorf("%q: got %d, %v; want an error naming the file", content, got, err)
		}
	}
	if _, err := readPidFile(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing pid file: %v", err)
	}
}

func TestMemoryLimitTooSmallToStartIsRefusedUpFront(t *testing.T) {
	k, err := guest.Lookup(KindName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.New(guest.Spec{Name: "c", Kind: KindName, MemoryBytes: 1}, guest.Env{}); err == nil || !strings.Contains(err.Error(), "at least 16MiB") {
		t.Errorf("memory of 1 byte: %v, want a refusal naming the least", err)
	}
	if _, err := k.New(guest.Spec{Name: "c", Kind: KindName, MemoryBytes: MinMemory}, guest.Env{}); err != nil {
		t.Errorf("memory of %d bytes: %v", MinMemory, err)
	}
}
