package remote

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// IP is what the peer needs to put its side of the test wire up (Wire).
var IP = programs.Program{Name: "ip", Package: "iproute2"}

// Wiring is the peer's side of the test wire: the address it answers at
// on its NIC, and the subnets (the host's routed guests) it reaches
// through the host side's address on the same wire.
type Wiring struct {
	NIC    string
	Addr   netip.Prefix
	Via    netip.Addr
	Routes []netip.Prefix
}

// KindPeerWire is the ledger entry of a peer's wiring. Its ID is the
// peer's URL; its data say how to reach it again, as KindPeer's do, and
// what to take off which NIC.
const KindPeerWire = "remote-peer-wire"

func init() { ledger.RegisterUndo(KindPeerWire, undoWire) }

// ErrWire says the peer's NIC cannot take the run's wiring as it is: the
// wrapping error says why.
var ErrWire = errors.New("the peer's NIC cannot be wired for the run")

// checkWireScript says why the peer's NIC cannot take the wiring, on a
// line "refuse<TAB>WHY": it does not exist, or the peer has the address
// or a route already (someone else's, which vfleet must not take away at
// the end); else it prints the NIC's line of ip -o link, "link<TAB>LINE"
// (not /sys/class/net, which shows the namespace sysfs was mounted in).
const checkWireScript = `nic=$1 addr=$2; shift 2
refuse() { printf 'refuse\t%s\n' "$*"; exit 0; }
link=$(ip -o link show dev "$nic" 2>/dev/null) || refuse "no interface $nic there"
for r; do
  [ -z "$(ip route show exact "$r")" ] || refuse "it has a route to $r already"
done
held=$(ip -o addr show to "${addr%/*}") || exit 1
[ -z "$held" ] || { set -- $held; refuse "it holds $4 on $2 already"; }
printf 'link\t%s\n' "$link"`

const wireScript = `nic=$1 addr=$2 via=$3; shift 3
ip link set dev "$nic" up && ip addr add "$addr" dev "$nic" || exit 1
for r; do ip route add "$r" via "$via" dev "$nic" || exit 1; done`

// unwireScript takes off what wireScript put on, whatever of it is there,
// and puts a NIC that was down down again.
const unwireScript = `nic=$1 addr=$2 down=$3; shift 3
ip link show dev "$nic" >/dev/null 2>&1 || exit 0
for r; do ip route del "$r" dev "$nic" 2>/dev/null; done
ip addr del "$addr" dev "$nic" 2>/dev/null
if [ "$down" = 1 ]; then ip link set dev "$nic" down; fi
true`

// CheckWire refuses (ErrWire) a NIC that is missing on the peer, and an
// address or a route of the wiring the peer has already: vfleet would
// take it away at the end. It changes nothing.
func (m *Machine) CheckWire(ctx context.Context, w Wiring) error {
	_, err := m.checkWire(ctx, w)
	return err
}

// checkWire is CheckWire, and says whether the NIC is up.
func (m *Machine) checkWire(ctx context.Context, w Wiring) (bool, error) {
	out, err := m.sh(ctx, nil, checkWireScript, append([]string{w.NIC, w.Addr.String()}, w.routes()...)...)
	if err != nil {
		return false, fmt.Errorf("check %s on %s: %w", w.NIC, m.Target, err)
	}
	said := tabbed(out)
	if why := said["refuse"]; why != "" {
		return false, fmt.Errorf("%w: %s on %s: %s", ErrWire, w.NIC, m.Target, why)
	}
	up, err := linkUp(said["link"])
	if err != nil {
		return false, fmt.Errorf("%s on %s: %w", w.NIC, m.Target, err)
	}
	return up, nil
}

func (w Wiring) routes() []string {
	out := make([]string, len(w.Routes))
	for i, r := range w.Routes {
		out[i] = r.String()
	}
	return out
}

// Wire puts the peer's side of the test wire up: the NIC up, its address
// and its routes, recorded in the ledger first, once CheckWire passes
// (checked again here, just before). Close takes it off again.
func (m *Machine) Wire(ctx context.Context, led *ledger.Ledger, w Wiring) (err error) {
	up, err := m.checkWire(ctx, w)
	if err != nil {
		return err
	}
	routes := w.routes()
	data := m.reach()
	data["nic"], data["addr"], data["routes"] = w.NIC, w.Addr.String(), strings.Join(routes, ",")
	if !up {
		data["down"] = "1"
	}
	e, err := led.Record(KindPeerWire, m.Target.String(), data)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.wires = append(m.wires, wire{led: led, entry: e})
	m.mu.Unlock()
	if _, err := m.sh(ctx, nil, wireScript, append([]string{w.NIC, w.Addr.String(), w.Via.String()}, routes...)...); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return errors.Join(fmt.Errorf("wire %s on %s: %w", w.NIC, m.Target, err), m.unwire(cctx))
	}
	return nil
}

// linkUp reads whether a link is up (administratively) from its line of
// `ip -o link show`: "2: eth1@if5: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu …".
func linkUp(line string) (bool, error) {
	_, rest, ok := strings.Cut(line, "<")
	flags, _, ok2 := strings.Cut(rest, ">")
	if !ok || !ok2 {
		return false, fmt.Errorf("no flags in ip link's %q", strings.TrimSpace(line))
	}
	return slices.Contains(strings.Split(flags, ","), "UP"), nil
}

// wire is one Wire's ledger entry, pending until it is taken off.
type wire struct {
	led   *ledger.Ledger
	entry ledger.Entry
}

// unwire takes off, newest first, what Wire put on the peer.
func (m *Machine) unwire(ctx context.Context) error {
	m.mu.Lock()
	wires := m.wires
	m.wires = nil
	m.mu.Unlock()
	var errs []error
	for i := len(wires) - 1; i >= 0; i-- {
		w := wires[i]
		if err := unwireWith(ctx, m, w.entry); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, w.led.Done(w.entry))
	}
	return errors.Join(errs...)
}

func unwireWith(ctx context.Context, m *Machine, e ledger.Entry) error {
	args := []string{e.Data["nic"], e.Data["addr"], e.Data["down"]}
	if r := e.Data["routes"]; r != "" {
		args = append(args, strings.Split(r, ",")...)
	}
	if _, err := m.sh(ctx, nil, unwireScript, args...); err != nil {
		return fmt.Errorf("unwire %s on %s: %w", e.Data["nic"], m.Target, err)
	}
	return nil
}

// undoWire reaches the peer again as the entry says and takes the run's
// wiring off its NIC.
func undoWire(ctx context.Context, e ledger.Entry) error {
	m, err := redial(ctx, e)
	if err != nil {
		return err
	}
	defer m.client.Close()
	return unwireWith(ctx, m, e)
}
