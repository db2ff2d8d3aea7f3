package netpath

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/tools"
)

// User: QEMU's user-mode networking, as a user without root networking
// gets it, through passt: each VM's frames go to a passt of its own in the
// host side, which carries the VM's connections through that namespace's
// sockets over the path's uplink to the peer (a NAT: the peer sees the
// host side's address).
const User Path = "user"

func init() { Register(user{}) }

type user struct{}

func (user) Spec() Spec {
	return Spec{Name: User, Index: 9, Layout: LayoutNAT, IfPrefix: "u", VMDevice: VMPasst,
		NoUplink: "its host side confines passt's sockets to the uplink veth by a routing table of its own; on a NIC that is not built yet",
		NoNamespaces: "passt is a VM's network stack: it takes Ethernet frames from an emulator's stream, " +
			"and a namespace guest has its own kernel's stack",
		NoInbound: "passt carries the VM's own connections only: the peer sees the host side's address, " +
			"and no port is forwarded to the VM"}
}

// passtReadyTimeout bounds the wait for a new passt to listen on its
// socket; it does so within milliseconds of its start.
const passtReadyTimeout = 10 * time.Second

func (u user) Build(sides Sides) (Live, error) {
	passt, err := tools.Find("passt")
	if err != nil {
		return nil, fmt.Errorf("the user path runs passt: %w", err)
	}
	version, err := tools.Version(context.Background(), passt)
	if err != nil {
		return nil, err
	}
	live := &userLive{sides: sides, passt: passt, version: version, dir: passtDir(sides)}
	if live.dirEntry, err = sides.Ledger.Record(ledger.KindDir, live.dir, nil); err != nil {
		return nil, err
	}
	if err := os.Mkdir(live.dir, 0o700); err != nil {
		return live, fmt.Errorf("the user path's state directory: %w", err)
	}
	if err := buildUplink(sides, u.Spec(), nil); err != nil {
		return live, err
	}
	// passt answers the VM's pings through ping sockets, which a new
	// namespace allows no group; root's is enough, as passt runs as root.
	if err := sides.Host.sysctl("net/ipv4/ping_group_range", "0 0"); err != nil {
		return live, err
	}
	return live, confineToUplink(sides)
}

// passtTable is the host side's routing table for what passt sends: a
// route to the uplink's subnet, and none elsewhere.
const passtTable = 1009

// confineToUplink makes the host side route what leaves from the user
// uplink's own address (every passt binds its sockets to it) through that
// uplink to the peer, and nowhere else the host side reaches: the peer's
// addresses on other paths, other paths' guests. The table's
// unreachable default ends the lookup there; without it the main table
// would be asked next. The host side's own addresses stay local, as the
// local table is asked first.
func confineToUplink(sides Sides) error {
	u := UplinkOf(User)
	h := sides.Host.nl
	up, err := h.LinkByName(u.HostIf)
	if err != nil {
		return fmt.Errorf("find %s: %w", u.HostIf, err)
	}
	if err := h.RouteAdd(&netlink.Route{Dst: ipNet(u.Host.Masked()), LinkIndex: up.Attrs().Index, Scope: netlink.SCOPE_LINK,
		Src: net.IP(u.Host.Addr().AsSlice()), Table: passtTable}); err != nil {
		return fmt.Errorf("route to %s in table %d: %w", u.Host.Masked(), passtTable, err)
	}
	if err := h.RouteAdd(&netlink.Route{Dst: ipNet(netip.MustParsePrefix("0.0.0.0/0")), Type: unix.RTN_UNREACHABLE, Table: passtTable}); err != nil {
		return fmt.Errorf("unreachable default in table %d: %w", passtTable, err)
	}
	rule := netlink.NewRule()
	rule.Src, rule.Table = ipNet(netip.PrefixFrom(u.Host.Addr(), 32)), passtTable
	if err := h.RuleAdd(rule); err != nil {
		return fmt.Errorf("rule from %s to table %d: %w", u.Host.Addr(), passtTable, err)
	}
	return nil
}

// passtDir is where the user path keeps its passts' sockets and logs, in
// a directory named after the host side, as the ovs path does.
func passtDir(sides Sides) string { return filepath.Join(sides.StateDir, sides.Host.name+"-user") }

// passtSocket is the path of the socket of the VM's passt whose link's
// host end would be called name.
func passtSocket(sides Sides, name string) string {
	return filepath.Join(passtDir(sides), name+".sock")
}

type userLive struct {
	sides    Sides
	passt    tools.Tool
	version  string
	dir      string
	dirEntry ledger.Entry

	mu      sync.Mutex
	daemons []*daemon // one per VM, in the order attached
	sockets []string  // theirs
	closed  bool
}

func (*userLive) AttachNamespace(*namespace, Link) error {
	// Network.Attach refuses first, naming the reason.
	return CheckNamespacePath(User)
}

// AttachTap starts the VM's passt, listening at link.HostIf. It gives the
// guest the addressing of its link, which the guest's init also sets from
// the kernel command line: its address, its gateway (passt itself,
// answering with the host end's MAC) and, through the gateway, the peer.
func (l *userLive) AttachTap(_ netlink.Link, link Link) error {
	if err := checkSocketPath("the user path's socket", link.HostIf); err != nil {
		return err
	}
	up := UplinkOf(User)
	args := []string{"--foreground",
		// The run's network is IPv4 only.
		"--ipv4-only",
		// passt drops to nobody by default, before it makes its socket,
		// which nobody cannot do in the run's directory. As root it still
		// confines itself: no capabilities, a user, mount (an empty root)
		// and PID namespace of its own and a seccomp filter.
		"--runas", "0",
		"--socket", link.HostIf, "--log-file", passtLog(link.HostIf),
		// The uplink is the template of the guest's addressing, and its
		// address the source of every socket, which the host side routes
		// to the peer only (confineToUplink). --outbound-if4 would not
		// do: binding to a device takes a capability passt has dropped.
		"--interface", up.HostIf, "--outbound", up.Host.Addr().String(),
		"--address", link.Addr.Addr().String(), "--netmask", strconv.Itoa(link.Addr.Bits()),
		"--gateway", link.Gateway.String(), "--mac-addr", link.HostMAC.String(),
		// The gateway is passt, not a way into the host side's own
		// loopback.
		"--no-map-gw",
		// The guest's init sets its address from the kernel command line.
		"--no-dhcp",
	}
	d, err := startDaemon(l.sides, "passt", passtLog(link.HostIf), exec.Command(l.passt.Path, args...))
	l.mu.Lock()
	if d != nil {
		l.daemons, l.sockets = append(l.daemons, d), append(l.sockets, link.HostIf)
	}
	l.mu.Unlock()
	if err != nil {
		return err
	}
	return l.awaitListening(d, link.HostIf)
}

// passtLog is the log of the passt listening at socket.
func passtLog(socket string) string { return strings.TrimSuffix(socket, ".sock") + ".log" }

// awaitListening waits until passt listens at socket: its file appears
// when it is bound, a moment before passt accepts connections.
func (l *userLive) awaitListening(d *daemon, socket string) error {
	deadline := time.Now().Add(passtReadyTimeout)
	for {
		table, err := l.sides.Host.readFile("/proc/thread-self/net/unix")
		if err != nil {
			return err
		}
		if unixListening(table, socket) {
			return nil
		}
		if d.gone.Err() != nil {
			return fmt.Errorf("passt exited (%v) before listening at %s: %s", d.cmd.ProcessState, socket, lastLines(d.log, 3))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("passt does not listen at %s after %v: %s", socket, passtReadyTimeout, lastLines(d.log, 3))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// unixListening says whether a unix socket table (/proc/net/unix) has a
// socket listening (flag __SO_ACCEPTCON) at path.
func unixListening(table []byte, path string) bool {
	const acceptCon = 0x10000
	sc := bufio.NewScanner(bytes.NewReader(table))
	for sc.Scan() {
		// Num RefCount Protocol Flags Type St Inode Path
		f := strings.Fields(sc.Text())
		if len(f) < 8 || f[7] != path {
			continue
		}
		if flags, err := strconv.ParseUint(f[3], 16, 32); err == nil && flags&acceptCon != 0 {
			return true
		}
	}
	return false
}

// Describe keys:
//
//	passt      the program and its version
//	passts     the sockets of the VMs' passts, in the order attached
//	addresses  what the guest sees and what the peer sees
//	state_dir  where the passts keep their sockets and logs
func (l *userLive) Describe() map[string]string {
	u := UplinkOf(User)
	d := map[string]string{
		"passt": l.passt.Path + " " + l.version,
		"addresses": fmt.Sprintf("each VM has its own /30 and reaches the peer %s through its gateway, its passt; "+
			"the peer sees every VM as the host side's %s", u.Peer.Addr(), u.Host.Addr()),
		"state_dir": l.dir,
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d["passts"] = strings.Join(l.sockets, " ")
	return d
}

func (l *userLive) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var errs []error
	for i := len(l.daemons) - 1; i >= 0; i-- {
		errs = append(errs, l.daemons[i].stop(l.sides.Ledger))
	}
	errs = append(errs, l.sides.Ledger.Release(context.Background(), l.dirEntry))
	return errors.Join(errs...)
}

// checkSocketPath refuses a unix socket's path longer than the kernel
// takes, naming what the socket is.
func checkSocketPath(what, path string) error {
	if max := len(unix.RawSockaddrUnix{}.Path) - 1; len(path) > max {
		return fmt.Errorf("%s %s is longer than a unix socket path may be (%d bytes): use a shorter state directory", what, path, max)
	}
	return nil
}
