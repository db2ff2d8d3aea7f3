package netpath

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
)

// OVS: guest veths (or a VM's tap) and an uplink as ports of an Open
// vSwitch bridge, switched by Open vSwitch daemons the run starts for
// itself in the host side.
const OVS Path = "ovs"

func init() { Register(ovs{}) }

// ovsBridgeName names the bridge and its own interface in the host side.
// Each run has its own daemons, database and host side, so every run can
// use the same name.
const ovsBridgeName = "ovsbr0"

type ovs struct{}

func (ovs) Spec() Spec {
	return Spec{Name: OVS, Index: 8, Layout: LayoutSwitched, IfPrefix: "o"}
}

func (o ovs) Build(sides Sides) (Live, error) {
	sw, err := startOVS(sides, ProbeOVSDatapath())
	if err != nil {
		return nil, err
	}
	live := &ovsLive{sides: sides, sw: sw}
	if err := setUp(sides.Host.nl, ovsBridgeName); err != nil {
		return live, err
	}
	s := o.Spec()
	// The bridge is not a kernel bridge: its port is added through the
	// daemons' database, not by nicUplink's master.
	if sides.takesNIC(s) {
		if err := setUp(sides.Host.nl, sides.NIC); err != nil {
			return live, fmt.Errorf("uplink %s: %w", sides.NIC, err)
		}
	} else if err := uplinkVeth(sides, s, nil); err != nil {
		return live, err
	}
	if err := live.addPort(sides.uplinkIf(s)); err != nil {
		return live, err
	}
	if sides.takesNIC(s) {
		// The peer across the NIC is addressed by whoever runs it.
		return live, addAddr(sides.Host.nl, ovsBridgeName, s.uplink().Host)
	}
	return live, addressUplink(sides, s, ovsBridgeName)
}

// OVSDatapath is where an ovs path's bridge switches packets.
type OVSDatapath struct {
	// Type is the bridge's datapath_type: "system" for the kernel's
	// openvswitch module, "netdev" for ovs-vswitchd's own userspace one.
	Type string
	Why  string
}

func (d OVSDatapath) String() string { return d.Type + " (" + d.Why + ")" }

// ProbeOVSDatapath says which datapath an ovs path built now would use.
// It asks the kernel for the generic netlink family ovs-vswitchd drives
// the kernel datapath through; the kernel loads the openvswitch module
// for that question where it has one.
func ProbeOVSDatapath() OVSDatapath {
	_, err := netlink.GenlFamilyGet("ovs_datapath")
	switch {
	case err == nil:
		return OVSDatapath{Type: "system", Why: "kernel: the openvswitch module"}
	case errors.Is(err, syscall.ENOENT):
		return OVSDatapath{Type: "netdev", Why: "userspace: no openvswitch kernel module"}
	default:
		return OVSDatapath{Type: "netdev", Why: fmt.Sprintf("userspace: the kernel's openvswitch datapath cannot be asked for: %v", err)}
	}
}

type ovsLive struct {
	sides Sides
	sw    *ovsSwitch

	mu     sync.Mutex
	ports  []string // in the order they were added
	closed bool
}

func (o *ovsLive) AttachNamespace(gns *namespace, link Link) error {
	if err := vethPair(o.sides.Host, link.HostIf, link.HostMAC, gns, GuestIfName, link.MAC, nil); err != nil {
		return err
	}
	return o.addPort(link.HostIf)
}

func (o *ovsLive) AttachTap(_ netlink.Link, link Link) error { return o.addPort(link.HostIf) }

func (o *ovsLive) addPort(name string) error {
	if err := o.sw.addPort(name); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ports = append(o.ports, name)
	return nil
}

// Describe keys:
//
//	datapath     which one, and why
//	version      of ovs-vswitchd
//	bridge       the bridge and how it switches
//	offload      what the datapath does about checksum and segmentation offloads
//	ports        the bridge's ports, in the order they were added
//	port.<name>  a port's packet counts, as ovs-vswitchd last refreshed them
//	state_dir    where the daemons kept their database, sockets and logs
func (o *ovsLive) Describe() map[string]string {
	d := map[string]string{
		"datapath":  o.sw.datapath.String(),
		"version":   o.sw.version,
		"bridge":    ovsBridgeName + ": fail_mode standalone, a learning switch (NORMAL action) without a controller",
		"offload":   ovsOffloads(o.sw.datapath),
		"state_dir": o.sw.dir,
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	d["ports"] = strings.Join(o.ports, " ")
	if o.closed {
		return d
	}
	// The counts are worth a command, not a failed description.
	if stats, err := o.sw.portStats(); err == nil {
		for _, p := range o.ports {
			if s, ok := stats[p]; ok {
				d["port."+p] = fmt.Sprintf("rx_packets=%d tx_packets=%d", s["rx_packets"], s["tx_packets"])
			}
		}
	}
	return d
}

// ovsOffloads says how the datapath treats the offloads of the frames it
// switches. The userspace datapath reads and writes ports through packet
// sockets: without userspace TSO it would forward a veth's frames with
// their checksums unfinished (the receiver drops them) and their
// segments as large as the sender's stack made them.
func ovsOffloads(dp OVSDatapath) string {
	if dp.Type == "netdev" {
		return "userspace TSO on (other_config:userspace-tso-enable=true): ovs-vswitchd takes frames with their virtio-net " +
			"headers and leaves checksums and segmentation to the port that sends them on; the ports' offload settings are unchanged"
	}
	return "the kernel datapath passes offloaded frames as they are; the ports' offload settings are unchanged"
}

func (o *ovsLive) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil
	}
	o.closed = true
	return o.sw.stop()
}
