package fastpath

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/vfleet/vfleet/internal/nsthread"
)

// topology is the layout the fast paths serve, built for a test: a
// host-side namespace (hs) with the uplink veth up0 to the peer and one
// veth g<i> per guest; every far end is eth0.
type topology struct {
	prefix string
	hs     *testNS
	peer   *testNS
	guests []*testNS
}

type testNS struct {
	name string
	h    netns.NsHandle
	nl   *netlink.Handle
}

const (
	peerAddr  = "198.19.0.2"
	peerPort  = 7
	hsUplink  = "198.19.0.1/24"
	peerLocal = "198.19.0.2/24"
)

// guestAddrs are guest i's point-to-point /30: the host side's address
// and the guest's.
func guestAddrs(i int) (hs, guest netip.Prefix) {
	base := netip.AddrFrom4([4]byte{198, 18, 0, byte(4 * i)})
	return netip.PrefixFrom(base.Next(), 30), netip.PrefixFrom(base.Next().Next(), 30)
}

// newTopology builds the namespaces and links; t.Cleanup deletes them
// (which a test may do earlier with remove).
func newTopology(t *testing.T, guests int) *topology {
	t.Helper()
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	tp := &topology{prefix: "vftest-" + hex.EncodeToString(b[:])}
	t.Cleanup(func() {
		if err := tp.remove(); err != nil {
			t.Error(err)
		}
	})
	var err error
	if tp.hs, err = newTestNS(tp.prefix + "-hs"); err != nil {
		t.Fatal(err)
	}
	if tp.peer, err = newTestNS(tp.prefix + "-peer"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < guests; i++ {
		g, err := newTestNS(fmt.Sprintf("%s-g%d", tp.prefix, i))
		if err != nil {
			t.Fatal(err)
		}
		tp.guests = append(tp.guests, g)
	}
	if err := tp.hs.sysctl("net/ipv4/ip_forward", "1"); err != nil {
		t.Fatal(err)
	}
	if err := tp.link("up0", hsUplink, tp.peer, peerLocal, ""); err != nil {
		t.Fatal(err)
	}
	peerEth0, err := tp.peer.nl.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.peer.nl.RouteAdd(&netlink.Route{
		LinkIndex: peerEth0.Attrs().Index,
		Dst:       &net.IPNet{IP: net.IPv4(198, 18, 0, 0).To4(), Mask: net.CIDRMask(15, 32)},
		Gw:        net.IPv4(198, 19, 0, 1).To4(),
	}); err != nil {
		t.Fatalf("peer route: %v", err)
	}
	for i, g := range tp.guests {
		hsAddr, gAddr := guestAddrs(i)
		if err := tp.link(fmt.Sprintf("g%d", i), hsAddr.String(), g, gAddr.String(), hsAddr.Addr().String()); err != nil {
			t.Fatal(err)
		}
	}
	return tp
}

// link makes the veth hostIf in hs with eth0 in far, addresses both ends
// and brings them up; a non-empty gw becomes far's default route.
func (tp *topology) link(hostIf, hostAddr string, far *testNS, farAddr, gw string) error {
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostIf}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(far.h))}
	if err := tp.hs.nl.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s: %w", hostIf, err)
	}
	for _, end := range []struct {
		ns         *testNS
		name, addr string
	}{{tp.hs, hostIf, hostAddr}, {far, "eth0", farAddr}} {
		l, err := end.ns.nl.LinkByName(end.name)
		if err != nil {
			return fmt.Errorf("find %s in %s: %w", end.name, end.ns.name, err)
		}
		a, err := netlink.ParseAddr(end.addr)
		if err != nil {
			return err
		}
		if err := end.ns.nl.AddrAdd(l, a); err != nil {
			return fmt.Errorf("address %s in %s: %w", end.name, end.ns.name, err)
		}
		if err := end.ns.nl.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s in %s up: %w", end.name, end.ns.name, err)
		}
	}
	if gw == "" {
		return nil
	}
	l, err := far.nl.LinkByName("eth0")
	if err != nil {
		return err
	}
	if err := far.nl.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.ParseIP(gw).To4()}); err != nil {
		return fmt.Errorf("default route in %s: %w", far.name, err)
	}
	return nil
}

// remove deletes every namespace; it is idempotent.
func (tp *topology) remove() error {
	var errs []error
	for _, ns := range append([]*testNS{tp.hs, tp.peer}, tp.guests...) {
		if ns != nil {
			errs = append(errs, ns.remove())
		}
	}
	return errors.Join(errs...)
}

// newTestNS creates a named namespace with its loopback up, on a thread
// that returns to its own namespace (or is retired) before anything else
// runs on it.
func newTestNS(name string) (*testNS, error) {
	ns := &testNS{name: name, h: -1}
	err := nsthread.Do(netns.None(), func() error {
		h, err := netns.NewNamed(name)
		if err != nil {
			return fmt.Errorf("create network namespace %s: %w", name, err)
		}
		ns.h = h
		return nil
	})
	if err != nil {
		return nil, err
	}
	if ns.nl, err = netlink.NewHandleAt(ns.h); err != nil {
		return nil, errors.Join(err, ns.remove())
	}
	lo, err := ns.nl.LinkByName("lo")
	if err == nil {
		err = ns.nl.LinkSetUp(lo)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("loopback in %s: %w", name, err), ns.remove())
	}
	return ns, nil
}

func (ns *testNS) remove() error {
	if ns.nl != nil {
		ns.nl.Close()
		ns.nl = nil
	}
	if ns.h.IsOpen() {
		ns.h.Close()
		ns.h = -1
	}
	if err := netns.DeleteNamed(ns.name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete network namespace %s: %w", ns.name, err)
	}
	return nil
}

// do runs fn on a thread inside the namespace: sockets fn creates stay in
// it wherever they are used later.
func (ns *testNS) do(fn func() error) error {
	return nsthread.Do(ns.h, fn)
}

func (ns *testNS) sysctl(key, value string) error {
	return ns.do(func() error { return os.WriteFile("/proc/sys/"+key, []byte(value), 0o644) })
}

// forwarded reads Ip ForwDatagrams of the namespace. /proc/net is the
// namespace of the process's main thread; thread-self is this thread's.
func (ns *testNS) forwarded() (uint64, error) {
	var snmp []byte
	err := ns.do(func() error {
		var err error
		snmp, err = os.ReadFile("/proc/thread-self/net/snmp")
		return err
	})
	if err != nil {
		return 0, err
	}
	return parseForwDatagrams(snmp)
}

// parseForwDatagrams finds Ip ForwDatagrams in /proc/net/snmp, whose "Ip:"
// lines are a line of names and then a line of values.
func parseForwDatagrams(snmp []byte) (uint64, error) {
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(snmp))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "Ip:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "ForwDatagrams" && i < len(f) {
				return strconv.ParseUint(f[i], 10, 64)
			}
		}
		break
	}
	return 0, errors.New("no Ip ForwDatagrams in snmp")
}

// echoServer accepts TCP connections in ns and echoes them until stop.
type echoServer struct {
	ln net.Listener
	wg sync.WaitGroup
}

func startEcho(t *testing.T, ns *testNS) *echoServer {
	t.Helper()
	s := &echoServer{}
	err := ns.do(func() error {
		var err error
		s.ln, err = net.Listen("tcp4", net.JoinHostPort(peerAddr, strconv.Itoa(peerPort)))
		return err
	})
	if err != nil {
		t.Fatalf("listen in %s: %v", ns.name, err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(60 * time.Second))
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(s.stop)
	return s
}

func (s *echoServer) stop() {
	s.ln.Close()
	s.wg.Wait()
}

// echo connects from ns to the peer's echo server, sends size random bytes
// in chunks while reading them back, and checks they come back unchanged.
func echo(ns *testNS, size int) error {
	var c net.Conn
	err := ns.do(func() error {
		var err error
		c, err = net.DialTimeout("tcp4", net.JoinHostPort(peerAddr, strconv.Itoa(peerPort)), 10*time.Second)
		return err
	})
	if err != nil {
		return fmt.Errorf("connect from %s: %w", ns.name, err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return err
	}
	sent := make([]byte, size)
	if _, err := rand.Read(sent); err != nil {
		return err
	}
	werr := make(chan error, 1)
	go func() {
		for off := 0; off < len(sent); off += 1024 {
			if _, err := c.Write(sent[off:min(off+1024, len(sent))]); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	got := make([]byte, size)
	_, rerr := io.ReadFull(c, got)
	if err := errors.Join(<-werr, rerr); err != nil {
		return fmt.Errorf("echo %d bytes from %s: %w", size, ns.name, err)
	}
	if !bytes.Equal(sent, got) {
		return fmt.Errorf("echo %d bytes from %s: came back different", size, ns.name)
	}
	return nil
}
