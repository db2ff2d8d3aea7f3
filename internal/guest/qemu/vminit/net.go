package vminit

import (
	"bytes"
	"fmt"
	"net"
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
func configureNet(c NetConfig) error { return configureNetWithin(c, nicWait) }

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
			return nil, fmt.Errorf("network: no interface with MAC %s within %s (is virtio_net loaded?)", mac, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
