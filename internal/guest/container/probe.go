package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/vfleet/vfleet/internal/cgroup"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/hostinfo"
)

// probeTimeout bounds a probe container's whole life.
const probeTimeout = 20 * time.Second

// Probe checks that the runtime is installed and really starts a container:
// a runtime can be present and still fail on this host's cgroup layout,
// seccomp or kernel.
func (kind) Probe(ctx context.Context, runtime string) error {
	if runtime == "" {
		runtime = DefaultRuntime
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: containers need root", guest.ErrNotSupported)
	}
	bin, err := runtimeBinary(runtime)
	if err != nil {
		return err
	}
	if runtime == runscRuntime {
		_, err := runscPlatform(ctx, bin)
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	out, err := probeRun(ctx, bin)
	if err == nil {
		return nil
	}
	msg := strings.TrimSpace(string(out))
	if explain := explainFailure(runtime, msg, cgroupLayout(), unifiedControllers("/sys")); explain != "" {
		return fmt.Errorf("%w: %s (%s said: %s)", guest.ErrNotSupported, explain, runtime, msg)
	}
	return fmt.Errorf("%w: %s does not start a container: %v: %s", guest.ErrNotSupported, runtime, err, msg)
}

// probeRun runs /bin/true in a throwaway container whose root filesystem is
// the host's own /usr, bound read-only, with the runtime's global flags
// and its state in the probe's own directory, and removes everything
// afterwards: a sandbox that hangs is killed with its cgroup.
func probeRun(ctx context.Context, bin string, flags ...string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "vfleet-probe-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	id := "vfleet-probe-" + hex.EncodeToString(suffix)
	rootfs := filepath.Join(dir, "rootfs")
	binds, err := hostUsrBinds(rootfs)
	if err != nil {
		return nil, err
	}
	cgroupsPath := path.Join(cgroup.Parent, id)
	config, err := Bundle(BundleOptions{Hostname: "probe", RootPath: rootfs, Args: []string{"/usr/bin/true"}, CgroupsPath: cgroupsPath, Binds: binds})
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(config)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		return nil, err
	}
	global := append(rootFlags(filepath.Join(dir, "state")), flags...)
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = deleteContainer(cctx, bin, global, id)
		_ = cgroup.Kill(cctx, cgroupsPath)
		_ = cgroup.Remove(cgroupsPath)
	}()
	cmd := exec.CommandContext(ctx, bin, append(global, "run", "--bundle", dir, id)...)
	// A sandbox killed with its runtime may hold the output open until its
	// cgroup is killed, which comes after.
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return out, err
}

// hostUsrBinds prepares an empty root with the host's /usr bound read-only
// and the usual top-level links (or binds, on a host without merged /usr).
func hostUsrBinds(rootfs string) ([]Bind, error) {
	if err := os.MkdirAll(filepath.Join(rootfs, "usr"), 0o755); err != nil {
		return nil, err
	}
	binds := []Bind{{Source: "/usr", Destination: "/usr", ReadOnly: true}}
	for _, top := range []string{"bin", "sbin", "lib", "lib64"} {
		target, err := os.Readlink("/" + top)
		switch {
		case err == nil:
			if err := os.Symlink(target, filepath.Join(rootfs, top)); err != nil {
				return nil, err
			}
		case errors.Is(err, os.ErrNotExist):
		default:
			if fi, serr := os.Stat("/" + top); serr == nil && fi.IsDir() {
				binds = append(binds, Bind{Source: "/" + top, Destination: "/" + top, ReadOnly: true})
			}
		}
	}
	return binds, nil
}

func cgroupLayout() string {
	mode, err := hostinfo.CgroupMode("/sys")
	if err != nil {
		return "unknown"
	}
	return mode
}

// unifiedControllers lists the controllers of a hybrid host's unified
// hierarchy, under sysRoot (/sys, or a fixture tree in tests): those no v1
// hierarchy is mounted with.
func unifiedControllers(sysRoot string) []string {
	b, err := os.ReadFile(filepath.Join(sysRoot, "fs", "cgroup", "unified", "cgroup.controllers"))
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

// explainFailure turns a runtime's error into the reason a user can act on,
// for failures whose cause is known. crun manages a hybrid host's v1
// hierarchies, but only while its unified hierarchy holds no controller
// (a controller lives in one or the other); one that no v1 hierarchy is
// mounted with (hugetlb, on a host that mounts the others) stays there,
// and mounting it as a v1 hierarchy is all crun needs.
func explainFailure(runtime, output, layout string, unified []string) string {
	if runtime != "crun" || layout == hostinfo.CgroupV2 || !strings.Contains(output, "cgroup") {
		return ""
	}
	if layout == hostinfo.CgroupHybrid && len(unified) > 0 && strings.Contains(output, "hybrid") {
		var mounts []string
		for _, c := range unified {
			mounts = append(mounts, fmt.Sprintf("mkdir -p /sys/fs/cgroup/%s && mount -t cgroup -o %s cgroup /sys/fs/cgroup/%s", c, c, c))
		}
		return fmt.Sprintf("crun refuses a hybrid cgroup layout whose unified (v2) hierarchy holds controllers, and this host's holds %s, mounted with no v1 hierarchy; "+
			"give it one (until the next boot: %s), use runc, or boot with the unified (v2) hierarchy", strings.Join(unified, ", "), strings.Join(mounts, "; "))
	}
	return fmt.Sprintf("crun cannot manage cgroups on this host's %s cgroup layout; use runc, or boot with the unified (v2) hierarchy", layout)
}
