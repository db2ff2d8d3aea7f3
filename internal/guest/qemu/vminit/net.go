package vminit

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
)

// IfName is the guest NIC's name, as namespace guests have it too.
const IfName = "eth0"

// nicWait bounds the wait for the NIC to appear: its driver probes the
// device while stage 1 loads it, but a slow emulated boot may still be
// registering it when PID 1 starts.
const nicWait = 10 * time.Second

// configureNet finds the NIC by its MAC address (the one QEMU was given),
// names it eth0, gives it its address, brings it up and, on a routed
// path, adds the default route through the host side.
func configureNet(c NetConfig) error {
	loadNICDrivers()
	return configureNetWithin(c, nicWait)
}

// loadNICDrivers asks modprobe for the drivers of the network devices on
// the guest's PCI bus that no driver has: a host's NIC lent to the VM (the
// passthrough path), which no udev here loads a driver for. A driver the
// kernel lacks leaves the NIC missing, which the wait for it then names.
func loadNICDrivers() {
	for _, alias := range driverlessNICs("/sys/bus/pci/devices") {
		if out, err := exec.Command("modprobe", "-q", alias).CombinedOutput(); err != nil {
			logf("network: modprobe %s: %v %s", alias, err, bytes.TrimSpace(out))
		}
	}
}

// driverlessNICs are the modaliases of the network-class devices (class
// 0x02xxxx) below dir, a PCI bus's devices in sysfs, that no driver has.
func driverlessNICs(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		dev := filepath.Join(dir, e.Name())
		class, err := os.ReadFile(filepath.Join(dev, "class"))
		if err != nil || !strings.HasPrefix(strings.TrimSpace(string(class)), "0x02") {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dev, "driver")); err == nil {
			continue
		}
		if alias, err := os.ReadFile(filepath.Join(dev, "modalias")); err == nil {
			out = append(out, strings.TrimSpace(string(alias)))
		}
	}
	return out
}

// configureNetWithin is configureNet waiting at most limit for the NIC.
func configureNetWithin(c NetConfig, limit time.Duration) error {
	return configureNetFrom(c.MAC, c, limit)
}

// configureNetFrom does configureNet for a NIC found by the MAC it has
// now, a clone's template's, and gives it c's.
func configureNetFrom(now net.HardwareAddr, c NetConfig, limit time.Duration) error {
	link, err := waitLinkByMAC(now, limit)
	if err != nil {
		return err
	}
	if !bytes.Equal(now, c.MAC) {
		// While the link is down; the driver tells the device too, which
		// filters what it delivers by this address.
		if err := netlink.LinkSetHardwareAddr(link, c.MAC); err != nil {
			return fmt.Errorf("network: MAC %s on %s: %w", c.MAC, link.Attrs().Name, err)
		}
	}
	if link.Attrs().Name != IfName {
		// Still down, so it can be renamed.
		if err := netlink.LinkSetName(link, IfName); err != nil {
			return fmt.Errorf("network: rename %s to %s: %w", link.Attrs().Name, IfName, err)
		}
	}
	ipn := &net.IPNet{IP: net.IP(c.Addr.Addr().AsSlice()), Mask: net.CIDRMask(c.Addr.Bits(), 32)}
	if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: ipn}); err != nil {
		return fmt.Errorf("network: address %s on %s: %w", c.Addr, IfName, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("network: set %s up: %w", IfName, err)
	}
	if c.Gateway.IsValid() {
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: net.IP(c.Gateway.AsSlice())}
		if err := netlink.RouteAdd(r); err != nil {
			return fmt.Errorf("network: default route via %s: %w", c.Gateway, err)
		}
	}
	return nil
}

func waitLinkByMAC(mac net.HardwareAddr, limit time.Duration) (netlink.Link, error) {
	deadline := time.Now().Add(limit)
	for {
		links, err := netlink.LinkList()
		if err != nil {
			return nil, fmt.Errorf("network: list links: %w", err)
		}
		for _, l := range links {
			if bytes.Equal(l.Attrs().HardwareAddr, mac) {
				return l, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("network: no interface with MAC %s within %s (is virtio_net, or the lent device's driver, in the guest's kernel?)", mac, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
