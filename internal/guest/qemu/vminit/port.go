package vminit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
)

// PortWait bounds the wait for the virtio-serial port after boot in
// vfleet's image: its driver probes asynchronously.
const PortWait = 30 * time.Second

// ServeDevice serves the agent protocol on a virtio-serial port. The port
// is one stream that the host connects to and disconnects from: a read
// sees end of file while the host is away, and the hello written for the
// next session waits in the kernel until the host connects again, so each
// host connection starts with a fresh hello. The port must appear within
// wait.
func ServeDevice(ctx context.Context, srv *agent.Server, path string, wait time.Duration) error {
	dev, err := resolvePort(path, wait)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open port: %w", err)
	}
	// Closing the port is what ends a read blocked waiting for the host,
	// so that SIGTERM at power-off ends the agent at once.
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	defer f.Close()
	for ctx.Err() == nil {
		began := time.Now()
		if err := srv.ServeConn(ctx, f); err != nil {
			fmt.Fprintln(os.Stderr, "vfleet-agent: session:", err)
		}
		// A session that ends at once (the host went away between
		// sessions) must not turn into a busy loop.
		if time.Since(began) < 100*time.Millisecond {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// resolvePort finds a port's device. /dev/virtio-ports/NAME is a link udev
// makes; a guest without udev finds the port by the name sysfs gives it,
// and makes the link itself so that the path works for everyone.
func resolvePort(path string, limit time.Duration) (string, error) {
	name := ""
	if dir, base := filepath.Split(path); filepath.Clean(dir) == "/dev/virtio-ports" {
		name = base
	}
	deadline := time.Now().Add(limit)
	for {
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
		if name != "" {
			if dev := PortByName("/sys/class/virtio-ports", name); dev != "" {
				_ = os.MkdirAll("/dev/virtio-ports", 0o755)
				_ = os.Symlink("../"+dev, path)
				return "/dev/" + dev, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("virtio-serial port %s did not appear within %s", path, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PortByName returns the device name (vport0p1) of the port called name
// under a sysfs virtio-ports class directory, or "".
func PortByName(classDir, name string) string {
	entries, _ := os.ReadDir(classDir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(classDir, e.Name(), "name"))
		if err == nil && strings.TrimSpace(string(b)) == name {
			return e.Name()
		}
	}
	return ""
}
