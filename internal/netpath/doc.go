// Package netpath builds the network a run measures across: a peer host in
// its own namespace, a host side (another namespace the run owns, so the
// root namespace's network configuration never changes) where guest
// interfaces end, and between them the data paths users compare:
//
//   - direct:  the bare baseline's own veth from the host side to the peer,
//     the floor every other path is measured against;
//   - bridge:  guest veths and an uplink on a Linux bridge;
//   - routed:  the host side forwards IP between guest and peer subnets;
//   - macvlan: guests on macvlan (bridge mode) children of an uplink veth,
//     VMs on macvtaps there;
//   - macvtap: the same on an uplink of its own, named as users name it for
//     VMs;
//   - ovs:     guest veths, VMs' taps and an uplink as ports of an Open
//     vSwitch bridge, switched by daemons the run starts in the host side;
//   - xdp, tc: our own eBPF fast paths (package fastpath) on the routed
//     layout, bypassing the host side's IP forwarding;
//   - veth:    a guest's veth ending in the peer itself, the floor for a
//     guest as direct is for the host side;
//   - user:    a VM's own passt, QEMU's user-mode networking;
//   - passthrough: a PCI NIC or SR-IOV virtual function of the host, bound
//     to vfio-pci and given to a VM whole (recorded in the ledger, given
//     back to its driver at Close).
//
// Every path has its own subnet and, but for veth, its own uplink veth to
// the peer, so one run can hold guests on several paths at once and each
// path's packets cross only its own devices. Addresses come from 198.18.0.0/15, the range
// set aside for benchmarking, and are derived from the path and the guest's
// index, as are MAC addresses, so a run is reproducible and readable.
//
// Each path is a DataPath registered by name in its own file; the network
// and the addressing plan ask the registry, never a path's name.
//
// Lifecycle: Create records each namespace in the run's ledger before it
// exists and builds the host side, the peer and every path's own part;
// Attach gives one guest its namespace and interface (AttachTap gives a VM
// a tap or a macvtap in the host side instead); Close deletes the namespaces, which
// takes every link, bridge and attached program with them. A path that
// runs daemons (ovs) records them and their directory in the ledger too,
// and stops them at Close. Nothing is created in the root namespace.
package netpath
