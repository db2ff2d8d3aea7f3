package qemu

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/netpath"
	"github.com/vfleet/vfleet/internal/nsthread"
	"github.com/vfleet/vfleet/internal/testutil"
)

// exchangeBytes is what a VM sends the peer and gets back over TCP: enough
// segments that offloaded checksums or segments a path cannot carry would
// stall the transfer.
const exchangeBytes = 2 << 20

// TestMicroVMOnEveryVMPath boots an emulated microVM on the paths that take
// VMs where cmd/vfleet's TestVMsOnTheNetworkPaths does not reach it (those
// that take no connection from the peer), and on the eBPF fast paths, one
// after the other in one network, and has it exchange data with the peer
// over TCP both ways, on the device its path gives it (a tap, a macvtap,
// or passt's socket) and with the offloads its path asks for: the guest's
// record must say both, and the traffic must go where the path says (the
// eBPF paths' programs, not the host side's forwarding). The CLI test
// checks the device and offloads of the VMs it boots itself: a TCG boot
// per path is the cost of these tests, so each path boots once.
func TestMicroVMOnEveryVMPath(t *testing.T) {
	testutil.SharesMachine(t)
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	img := testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	root := t.TempDir()
	led, err := ledger.Create(root, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	var paths []netpath.Path
	for _, p := range netpath.GuestPaths() {
		// A lent PCI device is the host's to give: netpath's
		// TestPassthroughDevice lends one where the host has it.
		if netpath.CheckVMPath(p) == nil && netpath.VMDeviceOf(p) != netpath.VMVFIO {
			paths = append(paths, p)
		}
	}
	ctx := context.Background()
	n, err := netpath.Create(ctx, netpath.Options{RunKey: testutil.RunID(t), Ledger: led, Paths: paths, StateDir: root})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
		if p := led.Pending(); len(p) > 0 {
			t.Errorf("ledger still holds %v", p)
		}
	}()
	port := exchangeServer(t, n.PeerNS())
	k, _ := guest.Lookup(KindName)
	for _, p := range paths {
		if _, counting, err := n.FastPathCounters(p); err != nil {
			t.Fatal(err)
		} else if !counting && netpath.CheckInbound(p) == nil {
			continue
		}
		t.Run(string(p), func(t *testing.T) {
			start := time.Now()
			link, err := n.AttachTap("vm-"+string(p), p)
			if err != nil {
				t.Fatal(err)
			}
			// What the runner hands a VM guest.
			tap := &guest.TapConfig{NSPath: n.HostSide(), Name: link.HostIf, Addr: link.Addr, Gateway: link.Gateway,
				MAC: link.MAC.String(), OffloadsOff: link.OffloadsOff}
			g, err := k.New(guest.Spec{Name: "vm-" + string(p), Kind: KindName, Runtime: MachineMicroVM, Accel: AccelTCG, Tap: tap},
				guest.Env{RunID: testutil.RunID(t), RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: root + "/state", Ledger: led})
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer g.Stop(ctx)
			booted := time.Since(start)
			d := g.Info().Details
			wantDevice := "tap"
			switch {
			case strings.ContainsRune(link.HostIf, '/'):
				wantDevice = netpath.VMPasst.String()
			case hostSideLinkType(t, n.HostSide(), link.HostIf) == "macvtap":
				wantDevice = "macvtap"
			}
			if d["net.device"] != wantDevice || d["net.tap"] != link.HostIf || (link.OffloadsOff != "") != strings.Contains(d["net.offload"], "csum=off") {
				t.Errorf("record says device %q %q, offloads %q; want a %s %s, offloads off: %v",
					d["net.device"], d["net.tap"], d["net.offload"], wantDevice, link.HostIf, link.OffloadsOff != "")
			}
			// A stream has no virtio-net header to carry offloads, nor vhost.
			if stream := wantDevice == netpath.VMPasst.String(); stream != strings.HasPrefix(d["net.offload"], "none") ||
				stream && !strings.HasPrefix(d["net.vhost"], "off") {
				t.Errorf("record says offloads %q, vhost %q on a %s", d["net.offload"], d["net.vhost"], wantDevice)
			}
			fwd0, err := n.ForwardedPackets()
			if err != nil {
				t.Fatal(err)
			}
			c0, counting, err := n.FastPathCounters(p)
			if err != nil {
				t.Fatal(err)
			}
			// bash's /dev/tcp: the image has no other plain TCP client.
			script := fmt.Sprintf("exec 3<>/dev/tcp/%s/%d && head -c %d /dev/zero >&3 && head -c %d <&3 | wc -c", link.Peer, port, exchangeBytes, exchangeBytes)
			r, err := g.Exec(ctx, agent.Request{Argv: []string{"bash", "-c", script}, TimeoutMS: 60000})
			if err != nil || !r.Succeeded() || strings.TrimSpace(string(r.Stdout)) != strconv.Itoa(exchangeBytes) {
				t.Fatalf("TCP exchange with the peer %s: %v %+v\n%s%s", link.Peer, err, r, r.Stdout, r.Stderr)
			}
			fwd, _ := n.ForwardedPackets()
			c, _, _ := n.FastPathCounters(p)
			t.Logf("%s: booted in %s, %d bytes each way in %s; host side forwarded %d; programs: %v",
				p, booted.Round(time.Millisecond), exchangeBytes, r.Wall().Round(time.Millisecond), fwd-fwd0, c.Sub(c0))
			// Every segment each way, fewer where GSO or GRO batch them.
			if counting && (c.Redirected-c0.Redirected < 2*exchangeBytes/65536 || fwd-fwd0 > 10) {
				t.Errorf("the path's programs redirected %d packets and the host side forwarded %d", c.Redirected-c0.Redirected, fwd-fwd0)
			}
			if err := g.Stop(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// exchangeServer listens in the namespace, reads exchangeBytes from each
// connection and sends as many back.
func exchangeServer(t *testing.T, nsPath string) int {
	t.Helper()
	var l net.Listener
	if err := nsthread.DoPath(nsPath, func() (err error) { l, err = net.Listen("tcp4", "0.0.0.0:0"); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(time.Minute))
				if _, err := io.CopyN(io.Discard, c, exchangeBytes); err == nil {
					_, _ = io.CopyN(c, zeros{}, exchangeBytes)
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// hostSideLinkType is the kind of the link name in the namespace at nsPath.
func hostSideLinkType(t *testing.T, nsPath, name string) string {
	t.Helper()
	var typ string
	if err := nsthread.DoPath(nsPath, func() error {
		l, err := netlink.LinkByName(name)
		if err == nil {
			typ = l.Type()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return typ
}

// zeros reads as endless zero bytes, what the guest sends too.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }
