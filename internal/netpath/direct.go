package netpath

import (
	"errors"

	"github.com/vishvananda/netlink"
)

// Direct is the bare baseline's own veth from the host side to the peer,
// the floor every other path is measured against.
const Direct Path = "direct"

func init() { Register(direct{}) }

type direct struct{}

func (direct) Spec() Spec {
	return Spec{Name: Direct, Index: 0, Layout: LayoutRouted, Baseline: true, NoVMs: "it is the bare host's own link"}
}

func (d direct) Build(sides Sides) (Live, error) {
	return noGuests{}, buildUplink(sides, d.Spec(), nil)
}

type noGuests struct{ quiet }

var errNoGuests = errors.New("the direct path is the host side's own and takes no guests")

func (noGuests) AttachNamespace(*namespace, Link) error { return errNoGuests }
func (noGuests) AttachTap(netlink.Link, Link) error     { return errNoGuests }

// quiet is embedded by live paths that have nothing to describe or to
// release beyond what their namespaces take along.
type quiet struct{}

func (quiet) Describe() map[string]string { return nil }
func (quiet) Close() error                { return nil }
